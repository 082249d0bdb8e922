// Syscalls+FilesystemIdentity.swift — whose files a thread makes and may touch: the owner of a
// directory, this process's effective uid, and the calling thread's filesystem uid and gid
// (setfsuid/setfsgid). A privileged collector works in an app's Crumbs directory as that
// directory's owner: every file it creates there is the owner's, and the kernel checks every
// access as the owner's (changing the filesystem uid from 0 clears the filesystem capabilities,
// CAP_DAC_OVERRIDE included, from the effective set until it is changed back).
//
// The filesystem ids are per thread on Linux (glibc's setfsuid is the plain system call, not
// broadcast to other threads): only the calling thread acts as the owner. Supplementary groups
// are not changed (they are per process). Glibc declares setfsuid in <sys/fsuid.h>, which Swift's
// Glibc module leaves out: both are found with dlsym, as pidfd_open and signalfd are (a static
// executable, where dlsym finds nothing, cannot switch and says so). Not signal-safe.

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

extension Syscall {
  /// The owner and group of the file or directory at `path` (links followed: a directory given
  /// on a command line may be a link its administrator made); nil when it cannot be seen.
  package static func owner(ofPath path: String) -> (uid: uid_t, gid: gid_t)? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return (info.st_uid, info.st_gid)
  }

  private typealias SetID = @convention(c) (UInt32) -> Int32

  /// glibc's setfsuid and setfsgid, nil when dlsym finds them not.
  private static let filesystemIDCalls: (setUID: SetID, setGID: SetID)? = {
    guard let uid = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setfsuid"),
      let gid = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setfsgid")
    else { return nil }
    return (unsafeBitCast(uid, to: SetID.self), unsafeBitCast(gid, to: SetID.self))
  }()

  /// The calling thread's filesystem uid and gid (what file creation and access checks use);
  /// the effective ids where they cannot be asked.
  package static func filesystemIdentity() -> (uid: uid_t, gid: gid_t) {
    guard let calls = filesystemIDCalls else { return (geteuid(), getegid()) }
    // Asking for an id that is not a valid one changes nothing and returns the current one.
    return (uid_t(bitPattern: calls.setUID(UInt32.max)), gid_t(bitPattern: calls.setGID(UInt32.max)))
  }

  /// Makes the calling thread create and access files as `uid`:`gid` (the group first: once the
  /// uid is not 0 the thread may no longer change it). The calls report no error: the ids are
  /// read back, and a thread that could not switch (no CAP_SETUID/CAP_SETGID) is refused with
  /// `EPERM`, its ids restored.
  package static func setFilesystemIdentity(uid: uid_t, gid: gid_t) throws(SystemCallError) {
    guard let calls = filesystemIDCalls else {
      throw SystemCallError(call: "setfsuid", refusal: .other("not found by dlsym (a static executable?)"))
    }
    let before = filesystemIdentity()
    _ = calls.setGID(gid)
    _ = calls.setUID(uid)
    let now = filesystemIdentity()
    guard now.uid == uid, now.gid == gid else {
      _ = calls.setUID(before.uid)
      _ = calls.setGID(before.gid)
      throw SystemCallError(call: "setfsuid", errno: .notPermitted)
    }
  }
}
