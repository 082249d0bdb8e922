// Crumbs: the whole SDK behind one import.
//
// The client (`CrumbsClient`) and automatic breadcrumbs live in this module; the recorder,
// reports and delivery are their own modules, re-exported here so `import Crumbs` keeps giving
// everything. A program that only records imports `CrumbsRecorder` and links no Foundation.

@_exported import CrumbsDelivery
@_exported import CrumbsRecorder
@_exported import CrumbsReports
