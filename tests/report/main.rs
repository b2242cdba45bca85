//! The `report` test binary. Renderers checked against independent readers: golden text, Chromium drawing the HTML report, Prometheus' parser reading the OpenMetrics exposition, pandas reading the CSV.

use netsweep_testkit::exe as common;

mod chromium;
mod golden;
mod openmetrics;
mod pandas;
