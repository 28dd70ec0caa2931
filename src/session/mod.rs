//! The session actor: phases, the turn loop, and its journal.
