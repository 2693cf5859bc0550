//! A whole HTTP/1.1 request on arbitrary bytes, for the fuzz target
//! `http_request` and `engine/tests/it/edges.rs`: the head checks of
//! [`crate::http_head`] on the input, then the bytes after the head (or the
//! whole input) through the chunked decoder of [`crate::http_chunked`].
//! It sits above both so that neither module imports the other for testing.
//!
//! Not for: the service's connection loop, which calls the two modules
//! itself.

/// Everything the request edge does with `data` (any panic is a bug).
pub fn exercise(data: &[u8]) {
    crate::http_head::exercise(data);
    let body = crate::http_head::find_head_end(data).map_or(data, |end| &data[end..]);
    crate::http_chunked::exercise(body);
}
