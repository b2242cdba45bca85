//! netsweep-core
