//! Assertions.
