// FuzzThreadDump — libFuzzer target for the reader of a thread-dump answer
// (`rings/<session>.threads-<cookie>.json`), which `crumbs threads PID` reads from another
// process: untrusted (a process of the same user may write anything there, or die mid-write).
//
// Entry points, in call order:
//   main                  --make-seeds DIR writes seeds (an answer holding a real capture of this
//                         process when one can be taken, an error answer, damaged ones); in a
//                         -sanitize=fuzzer build crumbs_fuzz_run drives fuzzOneInput; in a normal
//                         build, files given are replayed
//   fuzzOneInput          ThreadDumpAnswer.decode, then the report threads it names (without
//                         reading any module file: the input names the paths); each must return or
//                         throw within the reader's bounds, never trap
// Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsPlatform
import CrumbsRecorder
import CrumbsReports
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Symbolication that reads no file the input names.
let offline: Symbolicator.Options = {
  var options = Symbolicator.Options()
  options.useLLVMSymbolizer = false
  options.readsModuleFiles = false
  return options
}()

func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
  guard let answer = try? ThreadDumpAnswer.decode(bytes) else { return 0 }
  let threads = answer.threads(options: offline)
  if threads.count != (answer.snapshot?.table.threads.count ?? 0) {
    fatalError("\(threads.count) report threads from \(answer.snapshot?.table.threads.count ?? 0) captured")
  }
  return 0
}

func makeSeeds(in directory: String) throws -> Int {
  mkdir(directory, 0o755)
  var seeds: [(String, [UInt8])] = []
  // A real capture of this process: the capture needs the crash handler (and so a ring).
  let scratch = directory + "/.seed-ring"
  if let ring = try? RingDirectory(path: scratch).createRing(), (try? CrashHandler.install(ring: ring)) != nil
  {
    defer {
      CrashHandler.uninstall()
      ring.close()
      Syscall.removeTree(scratch)
    }
    if let snapshot = try? LiveThreadCapture.capture() {
      let answer = ThreadDumpAnswer(
        pid: getpid(), sessionID: "seed", cookie: 1, snapshot: snapshot, error: nil)
      let bytes = try answer.encoded()
      seeds.append(("live.json", bytes))
      seeds.append(("live-cut.json", Array(bytes.prefix(bytes.count / 2))))
    }
  }
  let failed = ThreadDumpAnswer(pid: 7, sessionID: "seed", cookie: 2, snapshot: nil, error: "no capture")
  seeds.append(("error.json", try failed.encoded()))
  seeds.append(("version-2.json", Array(#"{"format":"crumbs.thread_dump","version":2}"#.utf8)))
  for (name, bytes) in seeds { try FuzzMain.writeFile(directory + "/" + name, bytes) }
  return seeds.count
}

FuzzMain.run(
  name: "FuzzThreadDump", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in
    do {
      let answer = try ThreadDumpAnswer.decode(bytes)
      return answer.snapshot.map { "\($0.table.threads.count) threads" } ?? "error answer"
    } catch {
      return "rejected: \(error)"
    }
  })
