// One way to reach the Go services, whichever shell the UI runs in: inside the Wails window the
// services are bound as window.go.app.<Service>.<Method> and events arrive through
// window.runtime.EventsOn; in a plain browser the Go browser-mode server offers the same services
// as POST /api/<Service>/<Method> (JSON array of arguments) and the events as server-sent events.

type Handler = (payload: any) => void;

interface WailsWindow {
  go?: { app?: Record<string, Record<string, (...args: unknown[]) => Promise<unknown>>> };
  runtime?: { EventsOn: (name: string, cb: Handler) => () => void };
}

export interface Transport {
  readonly mode: "wails" | "browser";
  call<T>(service: string, method: string, ...args: unknown[]): Promise<T>;
  on(event: string, handler: Handler): void;
}

class WailsTransport implements Transport {
  readonly mode = "wails" as const;
  constructor(private w: Required<WailsWindow>) {}

  call<T>(service: string, method: string, ...args: unknown[]): Promise<T> {
    const fn = this.w.go.app?.[service]?.[method];
    if (!fn) return Promise.reject(new Error(`${service}.${method} is not bound in this window`));
    return fn(...args) as Promise<T>;
  }

  on(event: string, handler: Handler): void {
    this.w.runtime.EventsOn(event, handler);
  }
}

class HTTPTransport implements Transport {
  readonly mode = "browser" as const;
  private source: EventSource;

  constructor() {
    this.source = new EventSource("api/events");
  }

  async call<T>(service: string, method: string, ...args: unknown[]): Promise<T> {
    const resp = await fetch(`api/${service}/${method}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(args),
    });
    let body: { result?: T; error?: string };
    try {
      body = await resp.json();
    } catch {
      throw new Error(`${service}.${method}: the server answered ${resp.status} without JSON`);
    }
    if (body.error) throw new Error(body.error);
    return body.result as T;
  }

  on(event: string, handler: Handler): void {
    this.source.addEventListener(event, (e) => handler(JSON.parse((e as MessageEvent).data)));
  }
}

export function connect(): Transport {
  const w = window as unknown as WailsWindow;
  if (w.go && w.runtime) return new WailsTransport(w as Required<WailsWindow>);
  return new HTTPTransport();
}
