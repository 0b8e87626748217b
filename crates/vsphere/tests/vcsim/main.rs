//! The vSphere client against vcsim, a real vim25 SOAP server (one process per test).
mod lifecycle;
mod marks;
mod outage;
mod session;
mod support;
mod tls;
