//! Fixed names: condition types, reasons and phases, declared once per operator.

/// Declares an enum of fixed names (condition types, reasons, phases: the API a user scripts
/// against), each written as its variant's name: `as_str`, `Display` and `ALL`.
///
/// ```
/// bosun_runtime::names!(
///     /// The conditions in `status.conditions`.
///     ConditionType {
///         /// All is well.
///         Ready,
///         Degraded,
///     }
/// );
/// assert_eq!(ConditionType::Ready.as_str(), "Ready");
/// assert_eq!(ConditionType::ALL.len(), 2);
/// ```
#[macro_export]
macro_rules! names {
    ($(#[$doc:meta])* $ty:ident { $($(#[$vdoc:meta])* $v:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $ty { $($(#[$vdoc])* $v),* }

        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$v),*];

            pub fn as_str(self) -> &'static str {
                match self { $($ty::$v => stringify!($v)),* }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
