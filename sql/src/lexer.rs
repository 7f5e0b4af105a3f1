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
    let pos_of = |i: usize, line: u32, line_start: usize| Pos {
        line,
        col: (src[line_start..i].chars().count() + 1) as u32,
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
