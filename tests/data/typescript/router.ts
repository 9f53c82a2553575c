import type { Request, Response } from "./http";
import { match, type Params } from "./match";

export interface Route {
  method: string;
  pattern: string;
  handle(req: Request, params: Params): Promise<Response>;
}

export type Middleware = (req: Request, next: () => Promise<Response>) => Promise<Response>;

export enum Method {
  Get = "GET",
  Post = "POST",
}

function sealed(target: Function): void {
  Object.seal(target);
}

@sealed
export class Router {
  private routes: Route[] = [];
  private middleware: Middleware[] = [];

  constructor(private readonly prefix: string = "") {}

  /** Add a route. */
  add(route: Route): this {
    this.routes.push({ ...route, pattern: this.prefix + route.pattern });
    return this;
  }

  use(mw: Middleware): void {
    this.middleware.push(mw);
  }

  async handle(req: Request): Promise<Response> {
    for (const route of this.routes) {
      const params = match(route.pattern, req.url);
      if (params && route.method === req.method) {
        const run = () => route.handle(req, params);
        return this.middleware.reduceRight<() => Promise<Response>>(
          (next, mw) => () => mw(req, next),
          run,
        )();
      }
    }
    return { status: 404, body: "not found" };
  }
}

export namespace Routes {
  export function health(): Route {
    return { method: "GET", pattern: "/health", handle: async () => ({ status: 200, body: "ok" }) };
  }
}
