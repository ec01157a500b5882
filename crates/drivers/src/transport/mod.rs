//! What every network driver shares below its protocol: the connection
//! (`stream`: plain TCP or TLS, with the worker's batched sends in
//! `send_batch`), the reused read buffer, TLS configuration from the
//! target's `sslmode`, the decoding of URL parts, the one path from a
//! target URL to a driver's settings (`target_url`), socket errors in
//! words (`io_error`), and `peer`: whether the server at the other end
//! speaks the driver's protocol at all.

pub(crate) mod io_error;
pub(crate) mod peer;
pub(crate) mod read_buffer;
pub(crate) mod send_batch;
pub(crate) mod stream;
pub(crate) mod target_url;
pub(crate) mod tls;
pub(crate) mod url_text;
