// SystemCallError.swift — the error of every system call, named by the recorder's public API
// (`RingCreationError`, `CrashHandlerError`, …). It is defined in the internal CrumbsPlatform
// target with the calls that throw it; re-exported here so that `import CrumbsRecorder` (or
// `import Crumbs`) is all an app needs to name it.

@_exported import struct CrumbsPlatform.SystemCallError
