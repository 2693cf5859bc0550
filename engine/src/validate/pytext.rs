//! Python's text semantics that a DRF serializer applies to request values.
//!
//! The service we replace is a Django REST Framework app, so a value is
//! judged by what Python does with it: `str.strip()` trims a particular set
//! of whitespace, `str(1e16)` is `"1e+16"`, and `int(" ３０ ")` is `30`. Each
//! function here reproduces one of those primitives exactly (CPython 3.11,
//! Unicode 14), so the validators in this module can be written the way DRF
//! wrote them.
//!
//! Not for: general number formatting or parsing anywhere else in the
//! service; these helpers are deliberately Python-shaped, not Rust-shaped.

/// `str.isspace()` / the `\s` class of `re` on `str` patterns.
///
/// Rust's `char::is_whitespace` (the Unicode White_Space property) lacks the
/// four ASCII information separators U+001C..U+001F, which Python counts
/// because their bidirectional class is B or S.
pub(crate) fn is_space(c: char) -> bool {
    matches!(c, '\u{1c}'..='\u{1f}') || c.is_whitespace()
}

/// `str.strip()` with no argument.
pub(crate) fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Python's `len()`: Unicode scalar values, not bytes.
pub(crate) fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// `repr(float)` (which is also `str(float)`): the shortest digits that
/// round-trip, in positional form for decimal exponents -4..=15 and
/// scientific form (`1e+16`, `1.5e-05`) outside it.
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` prints the same shortest round-trip digits as Python's
    // repr; only the layout differs, so take the digits and exponent from it.
    let sci = format!("{x:e}");
    let (mantissa, exponent) = match sci.split_once('e') {
        Some(parts) => parts,
        None => return sci,
    };
    let exponent: i32 = match exponent.parse() {
        Ok(e) => e,
        Err(_) => return sci,
    };
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    // CPython's float_repr_style 'short' switches to an exponent when the
    // decimal point would sit more than 16 places right of the first digit
    // or 4 and more places left of it.
    if !(-4..16).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exponent.unsigned_abs()));
    } else if exponent >= 0 {
        let int_len = exponent as usize + 1;
        if digits.len() > int_len {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        } else {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', int_len - digits.len()));
            out.push_str(".0");
        }
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n(
            '0',
            exponent.unsigned_abs() as usize - 1,
        ));
        out.push_str(&digits);
    }
    out
}

/// The first code point of each run of ten decimal digits (Unicode general
/// category Nd, Unicode 14 as in CPython 3.11). Every run is contiguous and
/// ordered 0..9, which is what lets `int()` accept `"٣٠"` or `"３０"`.
const DECIMAL_DIGIT_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
    0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
    0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0, 0xff10,
    0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0, 0x11650,
    0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0, 0x16b50,
    0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
];

/// The value of a Unicode decimal digit (`unicodedata.decimal`).
fn decimal_value(c: char) -> Option<u8> {
    let code = u32::from(c);
    // The table is sorted, so the candidate run is the last zero <= code.
    let idx = DECIMAL_DIGIT_ZEROS.partition_point(|&zero| zero <= code);
    let zero = *DECIMAL_DIGIT_ZEROS.get(idx.checked_sub(1)?)?;
    let value = code - zero;
    if value < 10 {
        u8::try_from(value).ok()
    } else {
        None
    }
}

/// The whitespace `int()` skips around the number once non-ASCII spaces have
/// been mapped to ' ' (CPython's `Py_ISSPACE`: no U+001C..U+001F here).
fn is_ascii_int_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `int(s)` in base 10, saturated to the i64 range: the callers only compare
/// the result against small bounds, so a saturated huge value compares the
/// same way the exact Python integer would. `None` where Python raises
/// ValueError.
///
/// Python first maps every non-ASCII decimal digit to its ASCII digit and
/// every non-ASCII space to ' ' (other non-ASCII characters make it fail),
/// then accepts: ASCII spaces, an optional sign, digits with single `_`
/// between them, ASCII spaces.
pub(crate) fn int_from_str(s: &str) -> Option<i64> {
    let mut ascii: Vec<u8> = Vec::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            ascii.push(c as u8);
        } else if let Some(d) = decimal_value(c) {
            ascii.push(b'0' + d);
        } else if is_space(c) {
            ascii.push(b' ');
        } else {
            return None;
        }
    }
    let mut i = 0;
    while i < ascii.len() && is_ascii_int_space(ascii[i]) {
        i += 1;
    }
    let negative = match ascii.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut value: i64 = 0;
    let mut digits = 0usize;
    let mut last_was_digit = false;
    while let Some(&b) = ascii.get(i) {
        if b.is_ascii_digit() {
            let d = i64::from(b - b'0');
            value = value.saturating_mul(10).saturating_add(d);
            digits += 1;
            last_was_digit = true;
        } else if b == b'_' && last_was_digit {
            // An underscore must sit between two digits.
            match ascii.get(i + 1) {
                Some(next) if next.is_ascii_digit() => {}
                _ => return None,
            }
            last_was_digit = false;
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    while i < ascii.len() && is_ascii_int_space(ascii[i]) {
        i += 1;
    }
    if i != ascii.len() {
        return None;
    }
    Some(if negative { -value } else { value })
}

/// DRF IntegerField's `re.compile(r'\.0*\s*$').sub('', s)`: drop a trailing
/// `.000` (plus trailing whitespace) so `"30.0"` counts as an integer.
///
/// Only the last '.' can start a match (the text after it may hold no other
/// '.'), so checking that one is enough.
pub(crate) fn strip_zero_fraction(s: &str) -> &str {
    if let Some(dot) = s.rfind('.') {
        let rest = &s[dot + 1..];
        let after_zeros = rest.trim_start_matches('0');
        if after_zeros.chars().all(is_space) {
            return &s[..dot];
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isspace_matches_python() {
        // [hex(c) for c in range(0x110000) if chr(c).isspace()] in CPython 3.11
        let python: [u32; 29] = [
            0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000,
            0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028,
            0x2029, 0x202f, 0x205f, 0x3000,
        ];
        let ours: Vec<u32> = (0..=0x10ffffu32)
            .filter_map(char::from_u32)
            .filter(|&c| is_space(c))
            .map(u32::from)
            .collect();
        assert_eq!(ours, python);
    }

    #[test]
    fn strip_and_len_are_pythons() {
        assert_eq!(strip("\u{1c} a b\u{3000}\n"), "a b");
        assert_eq!(strip("\u{200b}a"), "\u{200b}a"); // ZWSP is not a space
        assert_eq!(char_len("яя"), 2);
        assert_eq!(char_len("😀"), 1);
    }

    #[test]
    fn float_repr_matches_python() {
        // Right-hand sides are CPython 3.11's repr() of the same values.
        let cases: [(f64, &str); 22] = [
            (30.0, "30.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1234567890123456.0, "1234567890123456.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1.5, "1.5"),
            (1e300, "1e+300"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (1e22, "1e+22"),
            (123456789.123, "123456789.123"),
            (-1.5e-7, "-1.5e-07"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (3600.0000001, "3600.0000001"),
            (1.2345e-4, "0.00012345"),
            (12345678901234567.0, "1.2345678901234568e+16"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "repr({x:e})");
        }
    }

    #[test]
    fn int_matches_python() {
        let ok: [(&str, i64); 16] = [
            (" 30 ", 30),
            ("\u{3000}30\u{3000}", 30),
            ("\u{b}30\u{c}", 30),
            ("\u{a0}30", 30),
            ("\u{85}30", 30),
            ("1_000", 1000),
            ("+1", 1),
            ("-1", -1),
            ("٣٠", 30),
            ("３０", 30),
            ("3٠", 30),
            ("0030", 30),
            ("-0", 0),
            ("١_٠", 10),
            ("𝟑𝟎", 30),
            ("\u{2028} 5", 5),
        ];
        for (s, want) in ok {
            assert_eq!(int_from_str(s), Some(want), "int({s:?})");
        }
        let bad = [
            "\u{1c}30", "30\u{1c}", "1__000", "_1", "1_", "+_1", "- 1", "+ 1", "", " ", "+", "1 0",
            "0x10", "1e3", "3.0", "\u{fffd}", "٣x",
        ];
        for s in bad {
            assert_eq!(int_from_str(s), None, "int({s:?}) must fail");
        }
        assert_eq!(int_from_str("99999999999999999999999"), Some(i64::MAX));
        assert_eq!(int_from_str("-99999999999999999999999"), Some(-i64::MAX));
    }

    #[test]
    fn zero_fraction_stripping_matches_drf_regex() {
        let cases = [
            ("30.0", "30"),
            ("30.", "30"),
            ("30.00 \n", "30"),
            ("30.0\u{1c}", "30"),
            ("30 .0", "30 "),
            (".0", ""),
            ("3.0.0", "3.0"),
            ("30.0x", "30.0x"),
            ("30.01", "30.01"),
            ("30.0\u{3000}", "30"),
            ("1.0\n\n", "1"),
            ("30", "30"),
        ];
        for (s, want) in cases {
            assert_eq!(strip_zero_fraction(s), want, "{s:?}");
        }
    }

    #[test]
    fn decimal_table_is_well_formed() {
        assert!(DECIMAL_DIGIT_ZEROS.windows(2).all(|w| w[0] + 10 <= w[1]));
        assert_eq!(decimal_value('7'), Some(7));
        assert_eq!(decimal_value('\u{669}'), Some(9));
        assert_eq!(decimal_value('\u{66a}'), None);
        assert_eq!(decimal_value('/'), None);
    }
}
