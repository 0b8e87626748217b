//! Setup shared by the end-to-end test binaries. Each binary uses only part of it, hence
//! `dead_code` allowed here.
#![allow(dead_code)]

pub mod control_plane;
pub mod moto;
