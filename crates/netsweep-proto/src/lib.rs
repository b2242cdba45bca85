//! netsweep-proto
