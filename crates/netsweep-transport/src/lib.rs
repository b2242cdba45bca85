//! netsweep-transport
