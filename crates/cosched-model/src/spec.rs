//! `name[key=value,...]` strings: the one parser of policy strings (cluster, node
//! and process level, `python:module:Class[...]`) and of parameterized application
//! preset names (`Workpile[unit=2.4]`). Callers interpret the values.
//!
//! Grammar (docs/formats/policies.md):
//!
//! ```text
//! spec   = name [ "[" params "]" ]
//! name   = 1*( ALPHA / DIGIT / "_" / "-" / ":" / "." )
//! params = [ param *( "," param ) ]
//! param  = key "=" value
//! ```
//!
//! Whitespace around the whole string, the name, each key and each value is
//! ignored (trimmed the same way everywhere): `" easy "` is `easy`. The
//! parameter list runs from the first `[` to the last character, which must be
//! `]`; a value is everything after its key's `=` up to the next `,` (it may hold
//! brackets, e.g. a Python list of one item). `name[]` has no parameters; an empty
//! item elsewhere (`a=1,,b=2`, a leading or trailing comma) is refused as a
//! likely typo; a key may appear once. Errors name the string, the 1-based
//! character position and the reason.

use thiserror::Error;

/// A parsed `name[key=value,...]` string; `params` in the order written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub name: String,
    pub params: Vec<(String, String)>,
}

/// Why a string is not `name[key=value,...]`: the string, the 1-based character
/// position of the problem and the reason.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("cannot parse {spec:?} at character {pos}: {reason}; expected name or name[key=value,...]")]
pub struct SpecError {
    pub spec: String,
    pub pos: usize,
    pub reason: String,
}

/// Parses `spec` (see the module documentation).
pub fn parse(spec: &str) -> Result<Spec, SpecError> {
    // Positions are reported in characters of the original string; `at` maps a
    // byte offset of `spec` to one.
    let at = |byte: usize| spec[..byte].chars().count() + 1;
    let bad = |byte: usize, reason: String| SpecError {
        spec: spec.to_string(),
        pos: at(byte),
        reason,
    };
    let lead = spec.len() - spec.trim_start().len();
    let s = spec.trim();
    let (name_part, inner) = match s.find('[') {
        None => (s, None),
        Some(open) => {
            if !s.ends_with(']') {
                return Err(bad(lead + s.len(), "missing closing ']'".into()));
            }
            (&s[..open], Some((lead + open + 1, &s[open + 1..s.len() - 1])))
        }
    };
    let name = name_part.trim();
    let name_at = lead + (name_part.len() - name_part.trim_start().len());
    if name.is_empty() {
        return Err(bad(name_at, "empty name".into()));
    }
    if let Some((i, c)) = name
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || "_-:.".contains(*c)))
    {
        return Err(bad(
            name_at + i,
            format!("character {c:?} is not allowed in a name (letters, digits, _ - : .)"),
        ));
    }
    let mut params: Vec<(String, String)> = Vec::new();
    if let Some((base, inner)) = inner {
        let mut items = Vec::new();
        let mut start = 0;
        for part in inner.split(',') {
            items.push((base + start, part));
            start += part.len() + 1;
        }
        let several = items.len() > 1;
        for (off, item) in items {
            let trimmed = item.trim();
            let item_at = off + (item.len() - item.trim_start().len());
            if trimmed.is_empty() {
                if several {
                    return Err(bad(
                        item_at,
                        "empty parameter (two commas in a row, or a leading or trailing comma)".into(),
                    ));
                }
                continue; // `name[]`
            }
            let Some((k, v)) = trimmed.split_once('=') else {
                return Err(bad(item_at, format!("parameter {trimmed:?} has no '='")));
            };
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() {
                return Err(bad(item_at, "empty parameter name".into()));
            }
            if params.iter().any(|(key, _)| key == k) {
                return Err(bad(item_at, format!("parameter {k:?} given twice")));
            }
            params.push((k.to_string(), v.to_string()));
        }
    }
    Ok(Spec {
        name: name.to_string(),
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> (usize, String) {
        let e = parse(s).unwrap_err();
        assert_eq!(e.spec, s);
        assert!(e.to_string().starts_with(&format!("cannot parse {s:?} at character {}: ", e.pos)));
        (e.pos, e.reason)
    }

    #[test]
    fn names_parameters_and_whitespace() {
        let s = parse(" easy [ reserve = 2 ,x=y] ").unwrap();
        assert_eq!(s.name, "easy");
        assert_eq!(
            s.params,
            vec![("reserve".into(), "2".into()), ("x".into(), "y".into())]
        );
        assert_eq!(parse(" easy").unwrap().name, "easy");
        assert_eq!(parse("easy\t").unwrap().name, "easy");
        assert!(parse("fcfs[]").unwrap().params.is_empty());
        assert!(parse("fcfs[ ]").unwrap().params.is_empty());
        let p = parse("python:my.mod:Cls[xs=[1],name='a']").unwrap();
        assert_eq!(p.name, "python:my.mod:Cls");
        assert_eq!(p.params[0], ("xs".into(), "[1]".into()));
        assert_eq!(parse("Workpile[unit=2.4]").unwrap().params[0].1, "2.4");
        assert_eq!(parse("gang[a=]").unwrap().params[0].1, "", "an empty value is the caller's to refuse");
    }

    #[test]
    fn errors_name_the_position_and_the_reason() {
        assert_eq!(err("easy[a=1"), (9, "missing closing ']'".into()));
        assert_eq!(err(""), (1, "empty name".into()));
        assert_eq!(err("  [a=1]"), (3, "empty name".into()));
        assert_eq!(err("ea sy").0, 3);
        assert!(err("e$").1.contains("'$' is not allowed"));
        assert_eq!(err("easy[a]"), (6, "parameter \"a\" has no '='".into()));
        assert_eq!(err("easy[a=1, =2]"), (11, "empty parameter name".into()));
        assert_eq!(err("easy[a=1,a=2]"), (10, "parameter \"a\" given twice".into()));
        for (typo, pos) in [("gang[rows=3,,]", 13), ("gang[rows=3,]", 13), ("gang[,rows=3]", 6), ("gang[ , ]", 7)] {
            let (p, reason) = err(typo);
            assert!(reason.starts_with("empty parameter ("), "{typo}: {reason}");
            assert_eq!(p, pos, "{typo}");
        }
        // Positions count characters, not bytes.
        assert_eq!(err("x[é=1,]").0, 7);
        assert!(err("é").1.contains("not allowed"));
    }
}
