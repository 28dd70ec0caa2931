//! Pure functions from session state to a provider request.
