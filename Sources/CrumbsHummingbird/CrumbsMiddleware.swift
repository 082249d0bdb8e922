// CrumbsMiddleware.swift — Hummingbird 2 requests in the in-flight ledger (built only with the
// package trait `Hummingbird`, so a program that does not enable it fetches and builds no
// Hummingbird). Each request: CrumbsClient.beginRequest (named by its route template, traced by
// its `traceparent` or the request id, a breadcrumb at its start) → next → answered / failed.
//
// Hummingbird resolves the route after the router's own middleware ran: added to a router group
// (`router.group().add(middleware:)`), this middleware sees `context.endpointPath`; added to the
// router itself it does not, and names the request by its method alone (docs/server.md).

#if Hummingbird
  import Crumbs
  import Hummingbird

  /// Puts each request in the client's in-flight ledger while its handler runs, named by its
  /// method and route template (`GET /orders/{id}`), with the trace id of its `traceparent` header
  /// or else Hummingbird's request id. A breadcrumb marks its start, another its end.
  public struct CrumbsMiddleware<Context: RequestContext>: RouterMiddleware {
    let client: CrumbsClient
    let reportsErrors: Bool

    /// - Parameters:
    ///   - client: the started client.
    ///   - reportsErrors: when true, an error the handler throws that is not an
    ///     `HTTPResponseError` (one the app did not map to a response: a 500) is sent as a
    ///     non-fatal report (`send(error:)`) with the request's route and trace. Off by default:
    ///     many apps throw for ordinary failures, and a report per request floods the store.
    public init(client: CrumbsClient, reportsErrors: Bool = false) {
      self.client = client
      self.reportsErrors = reportsErrors
    }

    public func handle(
      _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
      let route = context.endpointPath.map { $0.hasPrefix("/") ? $0 : "/" + $0 } ?? ""
      let name = route.isEmpty ? request.method.rawValue : request.method.rawValue + " " + route
      let open = client.beginRequest(
        name, traceparent: request.headers.first { $0.name.canonicalName == "traceparent" }?.value,
        requestID: context.id, path: request.uri.path)
      do {
        // The request's scope: a non-fatal report made in the handler carries its trace.
        let response = try await CrumbsOperation.$current.withValue(open.operation) {
          try await next(request, context)
        }
        open.answered(status: response.status.code)
        return response
      } catch let error as any HTTPResponseError {
        open.answered(status: error.status.code)
        throw error
      } catch {
        open.failed(error, report: reportsErrors)
        throw error
      }
    }
  }
#endif
