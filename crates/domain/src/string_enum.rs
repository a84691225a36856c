//! [`string_enum!`](crate::string_enum): enums whose values have one stable name each, stored
//! in the database and shown in the API, written once as `Variant => "name"` pairs.

/// Declares an enum of unit variants, each with one stable name, and generates from the
/// `Variant => "name"` pairs:
///
/// - `ALL`, every variant in declaration order;
/// - `as_str(self) -> &'static str`, the variant's name;
/// - `parse(&str) -> Option<Self>`, the variant of a name (exact match);
/// - `Display`, writing the name;
/// - [`Named`](crate::Named), for generic code.
///
/// The enum keeps the attributes written on it (its derives among them; it must be `Copy`).
/// Optional trailing items add:
///
/// - `impl FromStr(field = "name");`: [`FromStr`](std::str::FromStr) refusing an unknown name
///   with a [`FieldError`](crate::validation::FieldError) of kind `InvalidValue` on that field,
///   listing the names;
/// - `impl Serde;`: `Serialize` and `Deserialize` as the name (an unknown name is refused as
///   serde's own derive refuses an unknown variant).
///
/// ```
/// agentry_domain::string_enum! {
///     /// A colour.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Colour {
///         /// Red.
///         Red => "red",
///         /// Dark blue.
///         DarkBlue => "dark_blue",
///     }
///     impl FromStr(field = "colour");
/// }
///
/// assert_eq!(Colour::DarkBlue.as_str(), "dark_blue");
/// assert_eq!(Colour::parse("red"), Some(Colour::Red));
/// assert_eq!(Colour::ALL, [Colour::Red, Colour::DarkBlue]);
/// assert_eq!("pink".parse::<Colour>().unwrap_err().field, "colour");
/// ```
#[macro_export]
macro_rules! string_enum {
    // The optional items, one at a time (internal).
    (@options $name:ident [$($text:literal),+]) => {};
    (@options $name:ident [$($text:literal),+] impl FromStr(field = $field:literal); $($rest:tt)*) => {
        impl ::std::str::FromStr for $name {
            type Err = $crate::validation::FieldError;

            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                Self::parse(s).ok_or_else(|| {
                    $crate::validation::FieldError::new(
                        $field,
                        $crate::validation::FieldErrorKind::InvalidValue,
                        ::std::format!("{s:?} is not one of: {}", [$($text),+].join(", ")),
                    )
                })
            }
        }
        $crate::string_enum!(@options $name [$($text),+] $($rest)*);
    };
    (@options $name:ident [$($text:literal),+] impl Serde; $($rest:tt)*) => {
        impl ::serde::Serialize for $name {
            fn serialize<S>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error>
            where
                S: ::serde::Serializer,
            {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D>(deserializer: D) -> ::std::result::Result<Self, D::Error>
            where
                D: ::serde::Deserializer<'de>,
            {
                let name = <::std::string::String as ::serde::Deserialize>::deserialize(deserializer)?;
                Self::parse(&name).ok_or_else(|| ::serde::de::Error::unknown_variant(&name, &[$($text),+]))
            }
        }
        $crate::string_enum!(@options $name [$($text),+] $($rest)*);
    };

    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)?
        }
        $($options:tt)*
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [Self; [$($text),+].len()] = [$(Self::$variant),+];

            /// The stable name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            /// The value with this name, if any.
            pub fn parse(value: &str) -> ::std::option::Option<Self> {
                match value {
                    $($text => ::std::option::Option::Some(Self::$variant),)+
                    _ => ::std::option::Option::None,
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::Named for $name {
            fn from_name(name: &str) -> ::std::option::Option<Self> {
                Self::parse(name)
            }
        }

        $crate::string_enum!(@options $name [$($text),+] $($options)*);
    };
}

/// What every [`string_enum!`](crate::string_enum) enum is: a value read back from its name
/// (generic code, such as a store reading a column, needs no per-enum function).
pub trait Named: Sized {
    /// The value with this name, if any (as the enum's own `parse`).
    fn from_name(name: &str) -> Option<Self>;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::str::FromStr;

    use crate::validation::FieldErrorKind;

    crate::string_enum! {
        /// A test enum with every option.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Shade {
            /// First.
            Light => "light",
            /// Second, a name unlike the variant's.
            Dark => "very-dark",
            /// Third.
            Dotted => "a.b.c",
        }
        impl FromStr(field = "shade");
        impl Serde;
    }

    crate::string_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Bare {
            One => "one",
        }
    }

    #[test]
    fn every_variant_round_trips_through_its_name() {
        assert_eq!(Shade::ALL, [Shade::Light, Shade::Dark, Shade::Dotted]);
        for shade in Shade::ALL {
            assert_eq!(Shade::parse(shade.as_str()), Some(shade));
            assert_eq!(shade.to_string(), shade.as_str());
            assert_eq!(Shade::from_str(shade.as_str()).unwrap(), shade);
            let json = serde_json::to_value(shade).unwrap();
            assert_eq!(json, serde_json::Value::String(shade.as_str().into()));
            assert_eq!(serde_json::from_value::<Shade>(json).unwrap(), shade);
        }
        assert_eq!(Shade::Dark.as_str(), "very-dark");
        assert_eq!(Bare::parse(Bare::One.as_str()), Some(Bare::One));
        assert_eq!(Bare::ALL.len(), 1);
    }

    #[test]
    fn unknown_names_are_refused() {
        for unknown in ["", "Light", "light ", "Dark", "dark", "one"] {
            assert_eq!(Shade::parse(unknown), None, "{unknown:?}");
            let e = unknown.parse::<Shade>().unwrap_err();
            assert_eq!((e.field.as_str(), e.kind), ("shade", FieldErrorKind::InvalidValue));
            assert!(serde_json::from_value::<Shade>(serde_json::json!(unknown)).is_err());
        }
        assert_eq!(
            "grey".parse::<Shade>().unwrap_err().message,
            r#""grey" is not one of: light, very-dark, a.b.c"#
        );
        let e = serde_json::from_str::<Shade>(r#""grey""#).unwrap_err().to_string();
        assert!(
            e.starts_with("unknown variant `grey`, expected one of `light`, `very-dark`, `a.b.c`"),
            "{e}"
        );
        assert_eq!(Bare::parse("two"), None);
    }

    /// Every enum declared with the macro keeps the names the database and the API already
    /// hold: a change here changes stored data or the API.
    #[test]
    fn the_domain_enums_keep_their_names() {
        fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<&'static str> {
            all.iter().map(|v| name(*v)).collect()
        }
        use crate::agents::{AgentStatus, AgentType, ChatRole};
        use crate::billing::LedgerReason;
        use crate::events::EventType;
        use crate::identity::{RefreshTokenStatus, TokenPurpose};
        use crate::memory::MemoryType;
        use crate::tenancy::{Permission, Plan, Role};
        use crate::workflows::{ExecutionEvent, IntegrationKind, RunOutcome, StepEvent};

        assert_eq!(names(&AgentType::ALL, AgentType::as_str), ["assistant", "support", "custom"]);
        assert_eq!(names(&AgentStatus::ALL, AgentStatus::as_str), ["active", "paused"]);
        assert_eq!(names(&ChatRole::ALL, ChatRole::as_str), ["system", "user", "assistant", "tool"]);
        assert_eq!(names(&MemoryType::ALL, MemoryType::as_str), ["semantic", "episodic", "procedural"]);
        assert_eq!(
            names(&LedgerReason::ALL, LedgerReason::as_str),
            ["welcome_grant", "chat_usage", "purchase", "memory_extraction"]
        );
        assert_eq!(
            names(&RefreshTokenStatus::ALL, RefreshTokenStatus::as_str),
            ["active", "rotated", "revoked"]
        );
        assert_eq!(names(&TokenPurpose::ALL, TokenPurpose::as_str), ["password_reset", "magic_link"]);
        assert_eq!(serde_json::to_value(TokenPurpose::MagicLink).unwrap(), serde_json::json!("magic_link"));
        assert_eq!(names(&Plan::ALL, Plan::as_str), ["starter", "pro", "enterprise"]);
        assert_eq!(names(&Role::ALL, Role::as_str), ["owner", "admin", "member", "viewer"]);
        assert_eq!(
            names(&Permission::ALL, Permission::as_str),
            [
                "agents:read",
                "agents:write",
                "memory:read",
                "memory:write",
                "knowledge:read",
                "knowledge:write",
                "workflows:read",
                "workflows:write",
                "workflows:execute",
                "webhooks:read",
                "webhooks:write",
                "billing:read",
                "billing:write",
                "members:read",
                "members:write",
            ]
        );
        assert_eq!(
            names(&EventType::ALL, EventType::as_str),
            [
                "agent.message.created",
                "agent.message.completed",
                "agent.created",
                "agent.updated",
                "agent.tool.called",
                "workflow.execution.started",
                "workflow.execution.completed",
                "workflow.execution.failed",
                "memory.consolidated",
                "memory.created",
                "memory.updated",
                "memory.invalidated",
                "billing.credits.low",
                "billing.purchase.completed",
                "tenant.member.added",
                "tenant.member.removed",
                "tenant.member.role_changed",
                "knowledge.file.indexed",
                "knowledge.file.failed",
                "workflow.execution.waiting",
            ]
        );
        assert_eq!(
            names(&IntegrationKind::ALL, IntegrationKind::as_str),
            ["chat", "code-host", "issue-tracker", "issue-tracker-2", "incident", "wiki"]
        );
        assert_eq!(
            names(&ExecutionEvent::ALL, ExecutionEvent::as_str),
            ["complete", "fail", "cancel", "wait", "resume", "retry"]
        );
        assert_eq!(
            names(&StepEvent::ALL, StepEvent::as_str),
            ["start", "complete", "fail", "skip", "retry", "rerun", "wait"]
        );
        assert_eq!(
            names(&RunOutcome::ALL, RunOutcome::as_str),
            ["done", "failed", "cancelled", "lost_lease", "released", "retry", "waiting"]
        );
    }
}
