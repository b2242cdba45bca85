//! netsweep-lab
