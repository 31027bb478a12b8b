use super::*;

fn norm(text: &str) -> String {
    PathEntry::parse(text, false).unwrap().path
}

#[test]
fn normalisation_is_lexical_and_keeps_anchors_symbolic() {
    let cases = [
        ("/", "/"),
        ("//", "/"),
        ("/a//b/./c/", "/a/b/c"),
        ("/a/b/../c", "/a/c"),
        ("/..", "/"),
        ("/../etc", "/etc"),
        ("~", "~"),
        ("~/", "~"),
        ("~/.ssh/", "~/.ssh"),
        ("~/a/../b", "~/b"),
        ("~/..", "~/.."),
        ("~/../x", "~/../x"),
        (".", "."),
        ("./", "."),
        ("./src", "src"),
        ("src/.", "src"),
        ("a/..", "."),
        ("..", ".."),
        ("../x", "../x"),
        ("../../x/./y", "../../x/y"),
        ("a/../../b", "../b"),
        // A relative name starting with `~` keeps its `./` (found by fuzzing:
        // `~config/hub` would read back as another user's home).
        ("./~config/hub", "./~config/hub"),
        ("a/../~x", "./~x"),
        ("~/.aws//*.pem", "~/.aws/*.pem"),
    ];
    for (input, expected) in cases {
        assert_eq!(norm(input), expected, "input {input:?}");
        // Normalising is idempotent: the output reads back as itself.
        assert_eq!(norm(expected), expected, "re-read of {expected:?}");
    }
}

#[test]
fn bad_entries_are_refused() {
    assert_eq!(
        PathEntry::parse("", false).unwrap_err().to_string(),
        "empty path"
    );
    assert!(PathEntry::parse("a\0b", false).is_err());
    assert_eq!(
        PathEntry::parse("~bob/x", false).unwrap_err().to_string(),
        "\"~bob/x\" names another user's home, which is not supported; write the path out"
    );
    assert!(PathEntry::parse("/x/*/", false).is_err());
    assert!(PathEntry::parse("x/**/", false).is_err());
    // A literal entry ending in `/` is an ordinary path.
    assert_eq!(PathEntry::parse("/x/*/", true).unwrap().path, "/x/*");
}

#[test]
fn literal_flag_is_dropped_without_glob_characters() {
    let entry = PathEntry::parse("/a/b", true).unwrap();
    assert!(!entry.literal);
    let entry = PathEntry::parse("/a/[b]", true).unwrap();
    assert!(entry.literal);
    assert!(!entry.is_glob());
    assert!(PathEntry::parse("/a/[b]", false).unwrap().is_glob());
}

#[test]
fn resolve_binds_home_and_cwd() {
    let home = Path::new("/home/u");
    let cwd = Path::new("/work/p");
    let resolve = |text: &str| PathEntry::parse(text, false).unwrap().resolve(home, cwd);
    assert_eq!(resolve("~"), PathBuf::from("/home/u"));
    assert_eq!(resolve("~/.ssh"), PathBuf::from("/home/u/.ssh"));
    assert_eq!(resolve("."), PathBuf::from("/work/p"));
    assert_eq!(resolve("../x"), PathBuf::from("/work/x"));
    assert_eq!(resolve("~/../../.."), PathBuf::from("/"));
    assert_eq!(resolve("/etc"), PathBuf::from("/etc"));
    assert_eq!(resolve("src/*.rs"), PathBuf::from("/work/p/src/*.rs"));
}

#[test]
fn glob_base_is_the_literal_prefix_directory() {
    let base = |text: &str| PathEntry::parse(text, false).unwrap().glob_base();
    assert_eq!(base("~/.aws/**/*.pem"), "~/.aws");
    assert_eq!(base("*.pem"), ".");
    assert_eq!(base("/*"), "/");
    assert_eq!(base("~/*"), "~");
    assert_eq!(base("~/x*"), "~");
    assert_eq!(base("/etc/ssh/ssh_host_*_key"), "/etc/ssh");
    assert_eq!(base("src/**/gen"), "src");
    assert_eq!(base("/plain/path"), "/plain/path");
}

fn glob(pattern: &str) -> PathMatcher {
    PathEntry::parse(pattern, false)
        .unwrap()
        .matcher(Path::new("/h"), Path::new("/c"))
}

#[test]
fn glob_semantics_follow_srt() {
    let yes = |pattern: &str, path: &str| {
        assert!(
            glob(pattern).matches(Path::new(path)),
            "{pattern} should match {path}"
        );
    };
    let no = |pattern: &str, path: &str| {
        assert!(
            !glob(pattern).matches(Path::new(path)),
            "{pattern} should not match {path}"
        );
    };
    yes("/a/*.pem", "/a/k.pem");
    yes("/a/*.pem", "/a/.pem");
    no("/a/*.pem", "/a/b/k.pem");
    yes("/a/**/*.pem", "/a/k.pem");
    yes("/a/**/*.pem", "/a/b/c/k.pem");
    no("/a/**/*.pem", "/b/k.pem");
    yes("/a/**", "/a/b/c");
    yes("/a/**", "/a/");
    no("/a/**", "/a");
    yes("/a/b?", "/a/b1");
    no("/a/b?", "/a/b/");
    no("/a/b?", "/a/b");
    yes("/a/[0-9]x", "/a/5x");
    no("/a/[0-9]x", "/a/ax");
    yes("/a/[!x]", "/a/!");
    no("/a/[!x]", "/a/y");
    // `[user-id]` spells no set (r-i runs backwards), so it is text.
    yes("/a/[user-id]", "/a/[user-id]");
    // An unclosed `[` is text.
    yes("/a/[x*", "/a/[xyz");
    yes("**/.env", "/c/.env");
    yes("**/.env", "/c/sub/deep/.env");
    no("**/.env", "/c/sub/.envrc");
    yes("~/.aws/*", "/h/.aws/credentials");
}

#[test]
fn covers_includes_descendants() {
    let matcher = glob("/a/*/secret");
    assert!(matcher.covers(Path::new("/a/b/secret/key")));
    assert!(!matcher.covers(Path::new("/a/b/public/key")));
    let exact = PathEntry::parse("~/.ssh", false)
        .unwrap()
        .matcher(Path::new("/h"), Path::new("/c"));
    assert!(exact.covers(Path::new("/h/.ssh/id_ed25519")));
    assert!(exact.matches(Path::new("/h/.ssh")));
    assert!(!exact.matches(Path::new("/h/.sshx")));
    assert_eq!(exact.base(), Path::new("/h/.ssh"));
}

#[test]
fn pathological_patterns_stay_polynomial() {
    let pattern = format!("/{}x", "a*".repeat(30));
    let path = format!("/{}", "a".repeat(200));
    assert!(!glob(&pattern).matches(Path::new(&path)));
}

#[test]
fn anchors_and_odd_homes() {
    let anchor = |text: &str| PathEntry::parse(text, false).unwrap().anchor();
    assert_eq!(anchor("/x"), Anchor::Root);
    assert_eq!(anchor("~"), Anchor::Home);
    assert_eq!(anchor("~/x"), Anchor::Home);
    assert_eq!(anchor("x"), Anchor::Cwd);
    assert_eq!(anchor("../x"), Anchor::Cwd);
    // A home with a trailing slash or dot segments still resolves cleanly.
    let entry = PathEntry::parse("~/.ssh", false).unwrap();
    let resolved = entry.resolve(Path::new("/home/u/"), Path::new("/"));
    assert_eq!(resolved, PathBuf::from("/home/u/.ssh"));
    let resolved = entry.resolve(Path::new("/home/./u/../v"), Path::new("/"));
    assert_eq!(resolved, PathBuf::from("/home/v/.ssh"));
    // `.` in the root directory is the root directory.
    let dot = PathEntry::parse(".", false).unwrap();
    assert_eq!(
        dot.resolve(Path::new("/h"), Path::new("/")),
        PathBuf::from("/")
    );
}
