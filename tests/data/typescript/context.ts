import type { Env, Input, TypedResponse } from './types'
import { HonoRequest } from './request'
import { serialize } from './utils/cookie'

type HeaderRecord =
  | Record<'Content-Type', BaseMime>
  | Record<ResponseHeader, string | string[]>
  | Record<string, string | string[]>

export type Data = string | ArrayBuffer | ReadableStream

interface JSONRespond {
  <T extends JSONValue | SimplifyDeepArray<unknown> | InvalidJSONValue, U extends StatusCode>(
    object: T,
    status?: U,
    headers?: HeaderRecord
  ): Response & TypedResponse<T, U, 'json'>;
  <T extends JSONValue, U extends StatusCode>(object: T, init?: ResponseInit): Response;
}

type Layout<T = Record<string, any>> = (props: T) => any

interface SetHeaders {
  (name: 'Content-Type', value?: BaseMime, options?: SetHeadersOptions): void
  (name: string, value?: string, options?: SetHeadersOptions): void
}

/**
 * The context of one request.
 */
export class Context<E extends Env = any, P extends string = any, I extends Input = {}> {
  /** The environment bindings. */
  env: E['Bindings'] = {}
  finalized: boolean = false
  error: Error | undefined
  #status: StatusCode = 200
  #layout: Layout<{ Layout: Layout }> | undefined
  #renderer: Renderer | undefined

  constructor(req: Request, options?: ContextOptions<E>) {
    this.#rawRequest = req
    if (options) {
      this.#executionCtx = options.executionCtx
      this.env = options.env
    }
  }

  /**
   * The request of this context.
   */
  get req(): HonoRequest<P, I['out']> {
    this.#req ??= new HonoRequest(this.#rawRequest, this.#path, this.#matchResult)
    return this.#req
  }

  /**
   * Render content with the current layout.
   */
  render: Renderer = (...args) => {
    this.#renderer ??= (content: string | Promise<string>) => this.html(content)
    return this.#renderer(...args)
  }

  setLayout = (
    layout: Layout<PropsForRenderer & { Layout: Layout }>
  ): Layout<PropsForRenderer & { Layout: Layout }> => {
    this.#layout = layout
    return layout
  }

  getLayout = (): Layout<PropsForRenderer & { Layout: Layout }> | undefined => {
    return this.#layout
  }

  /**
   * Set a response header.
   */
  header: SetHeaders = (name, value, options): void => {
    if (value === undefined) {
      this.#headers.delete(name)
    } else if (options?.append) {
      this.#headers.append(name, value)
    } else {
      this.#headers.set(name, value)
    }
  }

  status = (status: StatusCode): void => {
    this.#status = status
  }

  newResponse = (
    data: Data | null,
    arg?: StatusCode | ResponseInit,
    headers?: HeaderRecord
  ): Response => {
    const status = typeof arg === 'number' ? arg : this.#status
    return new Response(data, { status, headers: this.#headers })
  }

  body = <U extends StatusCode>(
    data: Data | null,
    arg?: U | ResponseInit,
    headers?: HeaderRecord
  ): Response & TypedResponse<null, U, 'body'> => {
    return this.newResponse(data, arg, headers) as any
  }

  text = <T extends string, U extends StatusCode>(
    text: T,
    arg?: U | ResponseInit,
    headers?: HeaderRecord
  ): Response & TypedResponse<T, U, 'text'> => {
    const h = { 'Content-Type': 'text/plain; charset=UTF-8', ...headers }
    return this.newResponse(text, arg, h) as any
  }

  json: JSONRespond = <T extends JSONValue, U extends StatusCode>(
    object: T,
    arg?: U | ResponseInit,
    headers?: HeaderRecord
  ): Response & TypedResponse<T, U, 'json'> => {
    const body = JSON.stringify(object)
    const h = { 'Content-Type': 'application/json; charset=UTF-8', ...headers }
    return this.newResponse(body, arg, h) as any
  }

  html = (
    html: string | Promise<string>,
    arg?: StatusCode | ResponseInit,
    headers?: HeaderRecord
  ): Response | Promise<Response> => {
    const h = { 'Content-Type': 'text/html; charset=UTF-8', ...headers }
    if (typeof html === 'object') {
      return html.then((resolved) => this.newResponse(resolved, arg, h))
    }
    return this.newResponse(html, arg, h)
  }

  redirect = <T extends RedirectStatusCode = 302>(location: string, status?: T): Response => {
    this.#headers.set('Location', String(location))
    return this.newResponse(null, status ?? 302)
  }

  notFound = (): Response | Promise<Response> => {
    this.#notFoundHandler ??= () => new Response()
    return this.#notFoundHandler(this)
  }

  cookie(name: string, value: string, opts?: CookieOptions): void {
    this.header('Set-Cookie', serialize(name, value, opts), { append: true })
  }
}
