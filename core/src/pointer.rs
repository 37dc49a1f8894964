//! Paths into the arguments, and how they are written: JSON pointers (RFC 6901).

/// One step of a path into the arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Segment {
    Key(String),
    Index(usize),
}

/// Renders segments (outermost first) as a JSON pointer (RFC 6901).
pub(crate) fn pointer<'a>(segments: impl IntoIterator<Item = &'a Segment>) -> String {
    let mut out = String::new();
    for segment in segments {
        out.push('/');
        match segment {
            Segment::Key(key) => out.push_str(&key.replace('~', "~0").replace('/', "~1")),
            Segment::Index(index) => out.push_str(&index.to_string()),
        }
    }
    out
}
