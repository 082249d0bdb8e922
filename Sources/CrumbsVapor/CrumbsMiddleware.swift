// CrumbsMiddleware.swift — Vapor 4 requests in the in-flight ledger (built only with the package
// trait `Vapor`, so a program that does not enable it fetches and builds no Vapor). Each request:
// CrumbsClient.beginRequest (named by its route, traced by its `traceparent` or the request id,
// a breadcrumb at its start) → next → answered / failed.
//
// Vapor resolves the route before its middleware runs, so `request.route` is there at the start
// (nil only for a request no route matched).

#if Vapor
  import Crumbs
  import Vapor

  /// Puts each request in the client's in-flight ledger while its handler runs, named by its
  /// method and route (`GET /orders/:id`), with the trace id of its `traceparent` header or else
  /// Vapor's request id. A breadcrumb marks its start, another its end.
  public struct CrumbsMiddleware: AsyncMiddleware {
    let client: CrumbsClient
    let reportsErrors: Bool

    /// - Parameters:
    ///   - client: the started client.
    ///   - reportsErrors: when true, an error the handler throws that is not an `AbortError` (one
    ///     the app did not map to a response: a 500) is sent as a non-fatal report
    ///     (`send(error:)`) with the request's route and trace. Off by default: many apps throw
    ///     for ordinary failures, and a report per request floods the store.
    public init(client: CrumbsClient, reportsErrors: Bool = false) {
      self.client = client
      self.reportsErrors = reportsErrors
    }

    public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
      let name =
        request.route.map { route in
          request.method.rawValue + " /" + route.path.map { "\($0)" }.joined(separator: "/")
        } ?? request.method.rawValue
      let open = client.beginRequest(
        name, traceparent: request.headers.first(name: "traceparent"), requestID: request.id,
        path: request.url.path)
      do {
        // The request's scope: a non-fatal report made in the handler carries its trace.
        let response = try await CrumbsOperation.$current.withValue(open.operation) {
          try await next.respond(to: request)
        }
        open.answered(status: Int(response.status.code))
        return response
      } catch let error as any AbortError {
        open.answered(status: Int(error.status.code))
        throw error
      } catch {
        open.failed(error, report: reportsErrors)
        throw error
      }
    }
  }
#endif
