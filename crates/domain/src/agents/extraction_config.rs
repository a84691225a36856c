//! What an agent sets about learning from its conversations: `config.memory_extraction`, and
//! which extractor each setting runs.

crate::string_enum! {
    /// How an agent learns facts from its stored exchanges.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum ExtractionMode {
        /// The agent's model when the service's provider is OpenAI-compatible, else the rules.
        #[default]
        Auto => "auto",
        /// The rule extractor: explicit statements, offline, free.
        Rules => "rules",
        /// The agent's model, charged as a chat.
        Model => "model",
        /// Nothing is learned.
        Off => "off",
    }
    impl FromStr(field = "config.memory_extraction");
}

impl ExtractionMode {
    /// The extractor this mode runs when `model_by_default` (the service's model is a remote
    /// OpenAI-compatible one): `None` for `off`.
    pub fn extractor(self, model_by_default: bool) -> Option<Extractor> {
        match self {
            Self::Auto if model_by_default => Some(Extractor::Model),
            Self::Auto | Self::Rules => Some(Extractor::Rules),
            Self::Model => Some(Extractor::Model),
            Self::Off => None,
        }
    }
}

/// Which extractor learns from an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extractor {
    /// The rule extractor.
    Rules,
    /// The agent's model.
    Model,
}
