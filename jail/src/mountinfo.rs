//! `/proc/self/mountinfo` field decoding, for the cgroup probe (supervisor)
//! and the mount aliases (pid 1).

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(b) => {
                out.push(char::from(b));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_escapes_are_decoded() {
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
        assert_eq!(unescape("/mnt/my\\040cg"), "/mnt/my cg");
    }
}
