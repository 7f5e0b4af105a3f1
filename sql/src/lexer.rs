//! Tokenizer for the TDengine dialect: identifiers, `backquoted` identifiers, single- and
//! double-quoted strings, numbers, duration literals (`10m`, `3650d`), operators and comments.

use crate::error::{syntax, Pos, SqlError};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// Unquoted identifier or keyword, as written.
    Ident(String),
    /// `backquoted` identifier, kept as written.
    QIdent(String),
    /// 'single' or "double" quoted string literal (quotes removed, escapes resolved).
    Str(String),
    /// Integer literal digits.
    Int(String),
    /// Decimal / exponent literal.
    Float(String),
    /// A number immediately followed by a unit: `10m`, `1d`, `3650d`.
    Duration(String),
    /// Punctuation and operators.
    Op(&'static str),
    Eof,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
    /// Byte offsets in the source.
    pub start: usize,
    pub end: usize,
}

impl Tok {
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::QIdent(s) => format!("`{s}`"),
            Tok::Str(s) => format!("string '{s}'"),
            Tok::Int(s) | Tok::Float(s) | Tok::Duration(s) => format!("'{s}'"),
            Tok::Op(s) => format!("'{s}'"),
            Tok::Eof => "end of input".to_string(),
        }
    }
}

const OPS: &[&str] = &[
    "<=", ">=", "!=", "<>", "==", "(", ")", ",", ".", ";", "*", "+", "-", "/", "%", "=", "<", ">",
];

pub fn tokenize(src: &str) -> Result<Vec<Token>, SqlError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0usize;
    let mut line = 1u32;
    let mut line_start = 0usize;
    // Columns count characters from the line start. Counting from there for every token is
    // quadratic in a long line (a 1 MiB IN list is one line), so the count resumes from the
    // previous token of the same line: positions are asked for in increasing order.
    let mut col_cursor = (0usize, 0usize); // (byte offset, characters from its line start)
    let mut pos_of = |i: usize, line: u32, line_start: usize| {
        if col_cursor.0 < line_start || col_cursor.0 > i {
            col_cursor = (line_start, 0);
        }
        let chars = col_cursor.1 + src[col_cursor.0..i].chars().count();
        col_cursor = (i, chars);
        Pos {
            line,
            col: (chars + 1) as u32,
        }
    };
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            i += 1;
            line += 1;
            line_start = i;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let pos = pos_of(i, line, line_start);
        // comments
        if c == b'-' && bytes.get(i + 1) == Some(&b'-') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i += 2;
            loop {
                if i >= bytes.len() {
                    return Err(syntax(pos, "unterminated comment"));
                }
                if bytes[i] == b'\n' {
                    line += 1;
                    line_start = i + 1;
                }
                if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/') {
                    i += 2;
                    break;
                }
                i += 1;
            }
            continue;
        }
        let start = i;
        if c == b'\'' || c == b'"' || c == b'`' {
            let quote = c;
            i += 1;
            let mut s = String::new();
            let mut seg = i;
            loop {
                if i >= bytes.len() {
                    return Err(syntax(pos, "unterminated quoted string or identifier"));
                }
                let b = bytes[i];
                if b == b'\n' {
                    line += 1;
                    line_start = i + 1;
                }
                if b == b'\\' && quote != b'`' {
                    s.push_str(&src[seg..i]);
                    let Some(&n) = bytes.get(i + 1) else {
                        return Err(syntax(pos, "unterminated quoted string"));
                    };
                    match n {
                        b'n' => s.push('\n'),
                        b't' => s.push('\t'),
                        b'r' => s.push('\r'),
                        b'0' => s.push('\0'),
                        _ => {
                            // keep the escaped character (may be multi-byte)
                            let ch = src[i + 1..].chars().next().unwrap_or('\\');
                            s.push(ch);
                            i += ch.len_utf8() - 1;
                        }
                    }
                    i += 2;
                    seg = i;
                    continue;
                }
                if b == quote {
                    if bytes.get(i + 1) == Some(&quote) {
                        s.push_str(&src[seg..=i]);
                        i += 2;
                        seg = i;
                        continue;
                    }
                    s.push_str(&src[seg..i]);
                    i += 1;
                    break;
                }
                i += 1;
            }
            let tok = match quote {
                b'`' => Tok::QIdent(s),
                _ => Tok::Str(s),
            };
            out.push(Token {
                tok,
                pos,
                start,
                end: i,
            });
            continue;
        }
        // Hexadecimal and binary integers (`0x1F`, `0b101`), as TDengine writes them: read
        // here into the decimal integer token every reader of numbers already takes.
        if let Some((n, end)) = radix_integer(bytes, i) {
            out.push(Token {
                tok: Tok::Int(n.to_string()),
                pos,
                start,
                end,
            });
            i = end;
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit()))
        {
            let mut is_float = false;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i < bytes.len() && bytes[i] == b'.' {
                is_float = true;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < bytes.len()
                && (bytes[i] == b'e' || bytes[i] == b'E')
                && (bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit())
                    || (matches!(bytes.get(i + 1), Some(b'+') | Some(b'-'))
                        && bytes.get(i + 2).is_some_and(|b| b.is_ascii_digit())))
            {
                is_float = true;
                i += 2;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let tok = if !is_float && i < bytes.len() && (bytes[i].is_ascii_alphabetic()) {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                Tok::Duration(src[start..i].to_string())
            } else if is_float {
                Tok::Float(src[start..i].to_string())
            } else {
                Tok::Int(src[start..i].to_string())
            };
            out.push(Token {
                tok,
                pos,
                start,
                end: i,
            });
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80)
            {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Ident(src[start..i].to_string()),
                pos,
                start,
                end: i,
            });
            continue;
        }
        let mut matched = None;
        for op in OPS {
            if src[i..].starts_with(op) {
                matched = Some(*op);
                break;
            }
        }
        match matched {
            Some(op) => {
                i += op.len();
                let op = match op {
                    "<>" => "!=",
                    "==" => "=",
                    o => o,
                };
                out.push(Token {
                    tok: Tok::Op(op),
                    pos,
                    start,
                    end: i,
                });
            }
            None => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(syntax(pos, format!("unexpected character '{ch}'")));
            }
        }
    }
    let pos = pos_of(bytes.len(), line, line_start);
    out.push(Token {
        tok: Tok::Eof,
        pos,
        start: bytes.len(),
        end: bytes.len(),
    });
    Ok(out)
}

/// A `0x`/`0b` integer starting at `i` (prefix in either case, at least one digit, at most
/// 64 bits, not followed by a letter, digit or `_`): its value and where it ends. `0b` alone
/// is not one (it is a duration of 0 nanoseconds), nor is anything wider than 64 bits (it
/// stays a word the parser names in its error).
fn radix_integer(bytes: &[u8], i: usize) -> Option<(u64, usize)> {
    if bytes.get(i) != Some(&b'0') {
        return None;
    }
    let radix = match bytes.get(i + 1)? {
        b'x' | b'X' => 16,
        b'b' | b'B' => 2,
        _ => return None,
    };
    let digits_start = i + 2;
    let mut end = digits_start;
    while bytes.get(end).is_some_and(|b| (*b as char).is_digit(radix)) {
        end += 1;
    }
    if end == digits_start
        || bytes
            .get(end)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    {
        return None;
    }
    let digits = std::str::from_utf8(bytes.get(digits_start..end)?).ok()?;
    let n = u64::from_str_radix(digits, radix).ok()?;
    Some((n, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        tokenize(src)
            .unwrap()
            .into_iter()
            .map(|t| t.tok)
            .filter(|t| *t != Tok::Eof)
            .collect()
    }

    /// `0x`/`0b` integers are read into decimal integer tokens; a `0b` duration, a number
    /// wider than 64 bits and one run into a word are not.
    #[test]
    fn hexadecimal_and_binary_integers() {
        let int = |s: &str| Tok::Int(s.to_string());
        assert_eq!(
            toks("0x1F 0X0a 0b101 0B0 0xFFFFFFFFFFFFFFFF"),
            vec![
                int("31"),
                int("10"),
                int("5"),
                int("0"),
                int("18446744073709551615")
            ]
        );
        assert_eq!(toks("0b"), vec![Tok::Duration("0b".to_string())]);
        assert_eq!(toks("0x"), vec![Tok::Duration("0x".to_string())]);
        assert_eq!(
            toks("0x10000000000000000"),
            vec![Tok::Duration("0x10000000000000000".to_string())]
        );
        assert_eq!(toks("0x1g"), vec![Tok::Duration("0x1g".to_string())]);
        assert_eq!(toks("0b12"), vec![Tok::Duration("0b12".to_string())]);
        assert_eq!(toks("-0x10"), vec![Tok::Op("-"), int("16")]);
    }

    fn positions(src: &str) -> Vec<(u32, u32)> {
        tokenize(src)
            .unwrap()
            .iter()
            .map(|t| (t.pos.line, t.pos.col))
            .collect()
    }

    #[test]
    fn positions_count_characters_from_the_line_start() {
        // Multi-byte characters count once; a new line (also inside a string or a comment)
        // starts over at column 1.
        assert_eq!(
            positions("SELECT 'é', x\n  FROM /* a\nb */ t -- c\n;"),
            vec![
                (1, 1),
                (1, 8),
                (1, 11),
                (1, 13),
                (2, 3),
                (3, 6),
                (4, 1),
                (4, 2)
            ]
        );
        assert_eq!(
            positions("a 'x\ny' b\n\nc"),
            vec![(1, 1), (1, 3), (2, 4), (4, 1), (4, 2)]
        );
    }

    #[test]
    fn positions_on_a_long_line_are_exact() {
        let n = 50_000;
        let src: String = (0..n).map(|i| format!("'é{i}',")).collect();
        let toks = tokenize(&src).unwrap();
        // The last string starts after n - 1 elements of `'é<i>',` (é is one character).
        let expect: usize = (0..n - 1).map(|i| format!("'é{i}',").chars().count()).sum();
        let last = &toks[toks.len() - 3];
        assert_eq!(last.tok, Tok::Str(format!("é{}", n - 1)));
        assert_eq!((last.pos.line, last.pos.col), (1, expect as u32 + 1));
    }
}
