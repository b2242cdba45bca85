//! netsweep-report
