package admin

// UPlotVersion is uplotVersion, for the tests.
const UPlotVersion = uplotVersion
