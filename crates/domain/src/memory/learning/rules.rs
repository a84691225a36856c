//! The rule extractor: the facts a user states explicitly ("my name is …", "I live in …",
//! "remember that …"), found without a model, the same way every time. It is what memory
//! learns with offline (the built-in responder, SmolLM2) and what `rules` asks for.
//!
//! A statement is found inside a sentence, after a trigger phrase; its value runs to the end
//! of the sentence or to a conjunction that starts another thought ("… and I …"). Each fact
//! is worded in the third person, as the agent will read it back, and statements about the
//! same thing (where the user lives) share a *topic*, so that a new one replaces the old.

use super::Candidate;

/// Longest value taken from one statement, in characters.
const MAX_VALUE_CHARS: usize = 200;

/// One kind of statement: its trigger phrases (lower case, each ending before the value), how
/// its fact is worded, and its topic.
struct Rule {
    triggers: &'static [&'static str],
    wording: fn(&str) -> String,
    topic: Option<&'static str>,
    /// Whether the value may run on past a conjunction ("remember that A and B").
    whole_sentence: bool,
}

const RULES: &[Rule] = &[
    Rule {
        triggers: &["remember that ", "please remember that ", "don't forget that ", "do not forget that "],
        wording: |v| v.to_owned(),
        topic: None,
        whole_sentence: true,
    },
    Rule {
        triggers: &["my name is ", "i am called ", "i'm called "],
        wording: |v| format!("The user's name is {v}"),
        topic: Some("name"),
        whole_sentence: false,
    },
    Rule {
        triggers: &["call me ", "please call me "],
        wording: |v| format!("The user wants to be called {v}"),
        topic: Some("preferred_name"),
        whole_sentence: false,
    },
    Rule {
        triggers: &[
            "i live in ",
            "i now live in ",
            "i moved to ",
            "i have moved to ",
            "i've moved to ",
            "i relocated to ",
            "i'm living in ",
            "i am living in ",
        ],
        wording: |v| format!("The user lives in {v}"),
        topic: Some("home"),
        whole_sentence: false,
    },
    Rule {
        triggers: &[
            "i work at ",
            "i work for ",
            "i now work at ",
            "i now work for ",
            "i'm working at ",
            "i am working at ",
            "i joined ",
        ],
        wording: |v| format!("The user works at {v}"),
        topic: Some("employer"),
        whole_sentence: false,
    },
    Rule {
        triggers: &["i prefer "],
        wording: |v| format!("The user prefers {v}"),
        topic: None,
        whole_sentence: false,
    },
    Rule {
        triggers: &["i really like ", "i like ", "i love ", "i enjoy "],
        wording: |v| format!("The user likes {v}"),
        topic: None,
        whole_sentence: false,
    },
    Rule {
        triggers: &["i don't like ", "i do not like ", "i dislike ", "i hate "],
        wording: |v| format!("The user dislikes {v}"),
        topic: None,
        whole_sentence: false,
    },
];

/// When-phrases that may close a statement, none of them part of its value.
const TIME_TAILS: &[&str] = &[
    " now",
    " these days",
    " nowadays",
    " recently",
    " lately",
    " yesterday",
    " today",
    " last week",
    " last month",
    " last year",
    " this week",
    " this month",
    " this year",
    " a while ago",
    " for a while",
    " for years",
    " since then",
];

/// Where a closing "<count> <unit> ago" starts ("two years ago", "3 weeks ago", "a month ago").
fn ago(lower: &str) -> Option<usize> {
    let head = lower.strip_suffix(" ago")?;
    let (head, unit) = head.rsplit_once(' ')?;
    let units = ["day", "days", "week", "weeks", "month", "months", "year", "years"];
    if !units.contains(&unit) {
        return None;
    }
    let (head, count) = head.rsplit_once(' ')?;
    let counts = ["a", "one", "two", "three", "four", "five", "six", "ten", "few", "some", "many"];
    (counts.contains(&count) || count.bytes().all(|b| b.is_ascii_digit())).then_some(head.len())
}

/// Words after which a value stops: they start another thought.
const STOPS: &[&str] = &[" and ", " but ", " so ", " because ", " which ", " though ", " although "];

/// The facts `message` states, in the order it states them; none for a message that states
/// nothing this extractor knows (a question, small talk).
pub fn extract(message: &str) -> Vec<Candidate> {
    let mut found: Vec<Candidate> = Vec::new();
    for sentence in sentences(message) {
        let lower = sentence.to_ascii_lowercase();
        // Questions state nothing ("do you remember that I …?").
        if sentence.ends_with('?') {
            continue;
        }
        // Facts one after another ("my name is Ada and I live in Lyon"), each from the end
        // of the one before.
        let mut from = 0;
        while let Some((at, rule, trigger)) = earliest_trigger(&lower, from) {
            // The same byte offsets hold in the original: ASCII lower-casing keeps every length.
            let Some(rest) = sentence.get(at + trigger.len()..) else { break };
            let Some(value) = value_of(rest, rule.whole_sentence) else {
                from = at + trigger.len();
                continue;
            };
            from = at + trigger.len() + value.len();
            let text = finish((rule.wording)(&value));
            if !found.iter().any(|c| c.text.eq_ignore_ascii_case(&text)) {
                found.push(Candidate { text, topic: rule.topic.map(str::to_owned) });
            }
            if rule.whole_sentence || from >= lower.len() {
                break;
            }
        }
    }
    found
}

/// The first trigger in `lower` at or after `from`: at the same place, the longest.
fn earliest_trigger(lower: &str, from: usize) -> Option<(usize, &'static Rule, &'static str)> {
    let mut taken: Option<(usize, &Rule, &str)> = None;
    for rule in RULES {
        for trigger in rule.triggers {
            let Some(found) = find_phrase(lower, trigger, from) else { continue };
            let better = match taken {
                None => true,
                Some((best, _, best_trigger)) => {
                    found < best || (found == best && trigger.len() > best_trigger.len())
                }
            };
            if better {
                taken = Some((found, rule, trigger));
            }
        }
    }
    taken
}

/// The sentences of `text`, trimmed, each with its closing mark.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if matches!(c, '.' | '!' | '?' | '\n' | ';') {
            let end = i + c.len_utf8();
            // A full stop inside a number or an abbreviation ("3.5", "St.Louis") ends nothing.
            let next = text[end..].chars().next();
            if c == '.' && next.is_some_and(|n| !n.is_whitespace()) {
                continue;
            }
            out.push(text[start..end].trim());
            start = end;
        }
    }
    out.push(text[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// Where `phrase` first starts in `lower` at or after byte `from`, as whole words (at the
/// start, or after a space or a comma).
fn find_phrase(lower: &str, phrase: &str, from: usize) -> Option<usize> {
    let mut from = from;
    while let Some(found) = lower.get(from..)?.find(phrase) {
        let at = from + found;
        let before = lower[..at].chars().next_back();
        if before.is_none_or(|c| c == ' ' || c == ',' || c == '(' || c == '"' || c == '\'') {
            return Some(at);
        }
        from = at + phrase.len();
    }
    None
}

/// The value at the start of `rest`: up to the end of the sentence, or to a word that starts
/// another thought; without closing punctuation; `None` when nothing is left.
fn value_of(rest: &str, whole_sentence: bool) -> Option<String> {
    let mut value = rest.trim().trim_end_matches(['.', '!', ';', ',', ':']).trim_end();
    if !whole_sentence {
        let lower = value.to_ascii_lowercase();
        if let Some(stop) = STOPS.iter().filter_map(|s| lower.find(s)).min() {
            value = value.get(..stop).unwrap_or(value);
        }
        // When it became true ("I moved to Porto last week", "… two years ago", "… now") is
        // no part of the fact: the fact's own time says that.
        loop {
            let lower = value.to_ascii_lowercase();
            let cut = TIME_TAILS
                .iter()
                .find(|t| lower.ends_with(*t))
                .map(|t| value.len() - t.len())
                .or_else(|| ago(&lower));
            match cut {
                Some(end) if end > 0 => {
                    value = value.get(..end).unwrap_or(value).trim_end_matches([',', ' '])
                }
                _ => break,
            }
        }
    }
    let value = value.trim().trim_end_matches(['.', '!', ';', ',', ':']).trim();
    // "I love it": a pronoun names nothing the agent could remember.
    let pronouns = ["it", "this", "that", "them", "you", "him", "her", "these", "those", "so"];
    if value.is_empty() || pronouns.contains(&value.to_ascii_lowercase().as_str()) {
        return None;
    }
    Some(value.chars().take(MAX_VALUE_CHARS).collect())
}

/// `message` asked in the person facts are worded in: "Where do I live?" reads "Where do the
/// user live?", which finds "The user lives in Porto." where the first person would not (the
/// embedding and the word match both see "user"). What is not first person stays as it is.
pub fn in_the_third_person(message: &str) -> String {
    let mut out = String::with_capacity(message.len() + 16);
    let mut changed = false;
    for (i, word) in message.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let core = word.trim_end_matches(['?', '!', '.', ',', ';', ':']);
        let tail = &word[core.len()..];
        let replaced = match core.to_ascii_lowercase().as_str() {
            "i" | "me" => Some("the user"),
            "my" | "mine" => Some("the user's"),
            "i'm" | "i’m" => Some("the user is"),
            "myself" => Some("the user"),
            _ => None,
        };
        match replaced {
            Some(r) => {
                changed = true;
                out.push_str(r);
                out.push_str(tail);
            }
            None => out.push_str(word),
        }
    }
    if changed { out } else { message.to_owned() }
}

/// `text` as a sentence: a capital first letter and a closing full stop.
fn finish(text: String) -> String {
    let mut chars = text.chars();
    let mut out: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(message: &str) -> Vec<(String, Option<String>)> {
        extract(message).into_iter().map(|c| (c.text, c.topic)).collect()
    }

    fn fact(text: &str, topic: Option<&str>) -> (String, Option<String>) {
        (text.to_owned(), topic.map(str::to_owned))
    }

    #[test]
    fn explicit_statements_become_facts_in_the_third_person() {
        assert_eq!(facts("Hi! My name is Ada."), [fact("The user's name is Ada.", Some("name"))]);
        assert_eq!(facts("I live in Lyon"), [fact("The user lives in Lyon.", Some("home"))]);
        assert_eq!(facts("Good news: I moved to Porto!"), [fact("The user lives in Porto.", Some("home"))]);
        assert_eq!(
            facts("Please call me Captain."),
            [fact("The user wants to be called Captain.", Some("preferred_name"))]
        );
        assert_eq!(
            facts("I prefer tea in the morning."),
            [fact("The user prefers tea in the morning.", None)]
        );
        assert_eq!(
            facts("Remember that the invoice is due on the 3rd and paid by card."),
            [fact("The invoice is due on the 3rd and paid by card.", None)]
        );
    }

    #[test]
    fn several_sentences_give_several_facts_in_order() {
        assert_eq!(
            facts("My name is Ada. I live in Lyon now; I like climbing. What's the weather?"),
            [
                fact("The user's name is Ada.", Some("name")),
                fact("The user lives in Lyon.", Some("home")),
                fact("The user likes climbing.", None),
            ]
        );
    }

    #[test]
    fn questions_small_talk_and_other_words_state_nothing() {
        assert!(facts("Do you remember that I live in Lyon?").is_empty());
        assert!(facts("What's the capital of France?").is_empty());
        assert!(facts("Thanks, that helps.").is_empty());
        assert!(facts("The nameplate says alive in bold").is_empty(), "only whole words trigger");
        assert!(facts("my name is .").is_empty(), "an empty value is no fact");
    }

    #[test]
    fn numbers_keep_their_full_stops_and_values_are_bounded() {
        assert_eq!(facts("I prefer version 3.5 of it."), [fact("The user prefers version 3.5 of it.", None)]);
        let long = format!("I live in {}", "x".repeat(500));
        assert_eq!(extract(&long)[0].text.chars().count(), "The user lives in ".len() + MAX_VALUE_CHARS + 1);
    }

    #[test]
    fn one_sentence_may_state_several_facts() {
        assert_eq!(
            facts("Hello, my name is Ada and I live in Lyon."),
            [fact("The user's name is Ada.", Some("name")), fact("The user lives in Lyon.", Some("home"))]
        );
        assert_eq!(
            facts("i work at Acme Corp and I love it"),
            [fact("The user works at Acme Corp.", Some("employer"))],
            "a pronoun names nothing"
        );
        assert_eq!(facts("I love it, and my name is Ada."), [fact("The user's name is Ada.", Some("name"))]);
    }

    #[test]
    fn when_it_became_true_is_no_part_of_the_fact() {
        for said in [
            "I moved to Porto last week.",
            "I moved to Porto two years ago",
            "I moved to Porto 3 months ago, recently",
            "I live in Porto these days!",
            "I live in Porto now.",
        ] {
            assert_eq!(facts(said), [fact("The user lives in Porto.", Some("home"))], "{said}");
        }
        assert_eq!(
            facts("I work at Ago Systems"),
            [fact("The user works at Ago Systems.", Some("employer"))],
            "a name is kept"
        );
        assert_eq!(facts("I like walks a day ago"), [fact("The user likes walks.", None)]);
    }

    #[test]
    fn a_question_is_asked_in_the_person_facts_are_worded_in() {
        assert_eq!(in_the_third_person("Where do I live these days?"), "Where do the user live these days?");
        assert_eq!(
            in_the_third_person("What's my name, and I'm who?"),
            "What's the user's name, and the user is who?"
        );
        assert_eq!(in_the_third_person("Is it in Illinois?"), "Is it in Illinois?", "only whole words");
    }

    #[test]
    fn the_same_fact_twice_is_one() {
        assert_eq!(facts("I live in Lyon. I live in Lyon!").len(), 1);
    }
}
