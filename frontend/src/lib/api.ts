// The one transport the whole UI shares (Wails bindings in the window, HTTP and server-sent
// events in a browser); see transport.ts.
import { connect } from "../transport";

export const api = connect();

// errText is the message of a thrown value, for a notice or a status line.
export function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
