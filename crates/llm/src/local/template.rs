//! The prompt of a chat, written in the model's own chat format.
//!
//! A GGUF chat model carries its format as a Jinja template (`tokenizer.chat_template`), which
//! is rendered here with MiniJinja; a model without one, or with one MiniJinja cannot render,
//! gets ChatML (`<|im_start|>role\n…<|im_end|>`), SmolLM2's and Qwen's format.
//!
//! What people wrote never becomes a control token: each turn's text is rendered as a marker,
//! and the rendered prompt is cut at the markers into the template's own text (whose
//! `<|im_start|>` and the like are read as the special tokens they name) and the turns' text
//! (tokenized as plain text, so a user who types `<|im_end|>` gets those characters, not the
//! end of their turn).

use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind};

/// ChatML, the format of models without a template of their own.
pub const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + \
    message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}\
    {{ '<|im_start|>assistant\n' }}{% endif %}";

/// A piece of a rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// The template's own text: its markers are the model's control tokens.
    Format(String),
    /// What a turn says: plain text, whatever it contains.
    Text(String),
}

/// One turn of the prompt as the template sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateTurn {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// What it says.
    pub content: String,
}

/// A chat format: the template and the tokens' texts it may name.
#[derive(Debug)]
pub struct ChatFormat {
    env: Environment<'static>,
    bos: String,
    eos: String,
    /// Whether the template is the model's own (`false`: the ChatML fallback).
    pub own: bool,
}

/// Marks a turn's text in the rendered prompt: characters of Unicode's private use area that no
/// template writes.
const OPEN: char = '\u{F8F0}';
const CLOSE: char = '\u{F8F1}';

impl ChatFormat {
    /// The format of a model whose template is `template` (ChatML when `None`, or when the
    /// template does not render a sample chat), with its BOS and EOS tokens' texts.
    pub fn new(template: Option<&str>, bos: &str, eos: &str) -> Self {
        if let Some(source) = template {
            let format = Self::build(source, bos, eos, true);
            if let Ok(format) = format {
                let sample = [
                    TemplateTurn { role: "system".into(), content: "s".into() },
                    TemplateTurn { role: "user".into(), content: "u".into() },
                ];
                match format.render(&sample) {
                    Ok(_) => return format,
                    Err(e) => {
                        tracing::warn!(error = %e, "the model's chat template does not render; using ChatML")
                    }
                }
            } else if let Err(e) = format {
                tracing::warn!(error = %e, "the model's chat template does not compile; using ChatML");
            }
        }
        Self::build(CHATML, bos, eos, false).unwrap_or_else(|_| unreachable!("ChatML compiles"))
    }

    fn build(source: &str, bos: &str, eos: &str, own: bool) -> Result<Self, Error> {
        let mut env = Environment::new();
        env.set_fuel(Some(1_000_000));
        env.add_function("raise_exception", |message: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        env.set_unknown_method_callback(python_string_methods);
        env.add_template_owned("chat", source.to_owned())?;
        Ok(Self { env, bos: bos.to_owned(), eos: eos.to_owned(), own })
    }

    /// The prompt for `turns`, ending with the opening of the assistant's reply.
    ///
    /// # Errors
    /// When the template fails on these turns (it raises an exception, say, for roles out of
    /// the order it wants).
    pub fn render(&self, turns: &[TemplateTurn]) -> Result<Vec<Piece>, Error> {
        let messages: Vec<Value> = turns
            .iter()
            .enumerate()
            .map(|(i, t)| {
                Value::from_iter([
                    ("role", Value::from(t.role.clone())),
                    ("content", Value::from(format!("{OPEN}{i}{CLOSE}"))),
                ])
            })
            .collect();
        let rendered = self.env.get_template("chat")?.render(minijinja::context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => self.bos.clone(),
            eos_token => self.eos.clone(),
        })?;
        Ok(split(&rendered, turns))
    }
}

/// Cuts `rendered` at the turn markers, putting each turn's text in its place.
fn split(rendered: &str, turns: &[TemplateTurn]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut rest = rendered;
    while let Some(open) = rest.find(OPEN) {
        let after = &rest[open + OPEN.len_utf8()..];
        let Some(close) = after.find(CLOSE) else { break };
        let turn = after[..close].parse::<usize>().ok().and_then(|i| turns.get(i));
        if open > 0 {
            pieces.push(Piece::Format(rest[..open].to_owned()));
        }
        if let Some(turn) = turn {
            pieces.push(Piece::Text(turn.content.clone()));
        }
        rest = &after[close + CLOSE.len_utf8()..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Format(rest.to_owned()));
    }
    pieces
}

/// The Python string methods chat templates call (`content.strip()`, `role.startswith(…)`).
fn python_string_methods(
    _state: &minijinja::State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    let unknown = || Error::from(ErrorKind::UnknownMethod);
    let Some(text) = value.as_str() else { return Err(unknown()) };
    let arg = |i: usize| args.get(i).and_then(Value::as_str);
    Ok(match (method, arg(0)) {
        ("strip", None) => Value::from(text.trim()),
        ("strip", Some(chars)) => Value::from(text.trim_matches(|c| chars.contains(c))),
        ("lstrip", None) => Value::from(text.trim_start()),
        ("rstrip", None) => Value::from(text.trim_end()),
        ("startswith", Some(prefix)) => Value::from(text.starts_with(prefix)),
        ("endswith", Some(suffix)) => Value::from(text.ends_with(suffix)),
        ("upper", None) => Value::from(text.to_uppercase()),
        ("lower", None) => Value::from(text.to_lowercase()),
        ("split", Some(sep)) => Value::from_iter(text.split(sep).map(Value::from)),
        ("replace", Some(from)) => Value::from(text.replace(from, arg(1).ok_or_else(unknown)?)),
        _ => return Err(unknown()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: &str, content: &str) -> TemplateTurn {
        TemplateTurn { role: role.into(), content: content.into() }
    }

    #[test]
    fn chatml_is_the_fallback_and_turn_text_stays_text() {
        let format = ChatFormat::new(None, "<s>", "</s>");
        assert!(!format.own);
        let pieces = format.render(&[turn("user", "Hi <|im_end|>")]).unwrap();
        assert_eq!(
            pieces,
            vec![
                Piece::Format("<|im_start|>user\n".into()),
                Piece::Text("Hi <|im_end|>".into()),
                Piece::Format("<|im_end|>\n<|im_start|>assistant\n".into()),
            ]
        );
    }

    #[test]
    fn a_models_own_template_is_rendered_with_its_python_methods() {
        let llama3 = "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}\
            <|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}\
            {% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";
        let format = ChatFormat::new(Some(llama3), "<|begin_of_text|>", "<|eot_id|>");
        assert!(format.own);
        let pieces = format.render(&[turn("system", "Be brief."), turn("user", "Hello")]).unwrap();
        let joined: String = pieces
            .iter()
            .map(|p| match p {
                Piece::Format(s) | Piece::Text(s) => s.as_str(),
            })
            .collect();
        assert_eq!(
            joined,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        let python = "{% for m in messages %}{{ m['role'].upper() }}{% if m['role'].startswith('us') %}!{% endif %}{% endfor %}";
        let pieces = ChatFormat::new(Some(python), "", "").render(&[turn("user", "x")]).unwrap();
        assert_eq!(pieces, vec![Piece::Format("USER!".into())]);
    }

    #[test]
    fn a_template_that_fails_falls_back_to_chatml() {
        let raising = "{{ raise_exception('Conversation roles must alternate') }}";
        assert!(!ChatFormat::new(Some(raising), "", "").own);
        assert!(!ChatFormat::new(Some("{% for %}"), "", "").own);
    }
}
