//! The `report` test binary. Renderers checked against independent readers: golden text, Chromium drawing the HTML report, Prometheus' parser reading the OpenMetrics exposition, pandas reading the CSV; and the generated seed pages against their committed results.

use netsweep_testkit::exe as common;

mod chromium;
mod compare;
mod experiments;
mod golden;
mod openmetrics;
mod pandas;
mod pictures;
