//! oajail-jail (placeholder until its work lands).
