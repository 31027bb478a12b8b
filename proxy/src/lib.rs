//! oajail-proxy (placeholder until its work lands).
