//! The Python exceptions the native module raises, and how Rust errors
//! become them. Messages are the Rust errors' own (they say what was
//! wrong and what to do, and never quote a password).

use pyo3::PyErr;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};

create_exception!(
    awa,
    AwaError,
    PyException,
    "An Awa operation failed (database, worker or schema); the message says what to do."
);
create_exception!(
    awa,
    ValidationError,
    PyValueError,
    "A job or setting was refused before anything was sent to the database."
);

/// Any error of the Rust client as an [`AwaError`]; invalid input as a
/// [`ValidationError`].
pub(crate) fn to_py(err: awa::Error) -> PyErr {
    match err {
        awa::Error::Invalid(e) => ValidationError::new_err(e.to_string()),
        other => AwaError::new_err(other.to_string()),
    }
}

/// A plane crate's error (already a message that says what to do).
pub(crate) fn plane(err: impl std::fmt::Display) -> PyErr {
    AwaError::new_err(err.to_string())
}
