// The service's JSON routes (docs/spec.md §11): fetch with the error body turned into an
// ApiError.

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.name = 'ApiError';
    this.status = status;   // 0: the server could not be reached
    this.code = code;
    this.details = details;
  }

  /** The message with the validation details a 422 carries, for a person to read. */
  describe() {
    if (!Array.isArray(this.details) || this.details.length === 0) return this.message;
    const parts = this.details
      .map((d) => (d && typeof d === 'object' ? d.message || d.msg : String(d)))
      .filter(Boolean);
    return parts.length ? `${this.message}: ${parts.join('; ')}` : this.message;
  }
}

// A 401 anywhere but the login itself means this browser's login ended (or never was):
// app.js shows the login form (login.py on the server).
const unauthorized = new Set();
export const onUnauthorized = (listener) => { unauthorized.add(listener); };
export const LOGIN_PATH = '/v1/login';

// The server's time, learned from every answer's `Sessionledger-Time` and carried forward by
// performance.now() (monotonic): countdowns count against it, so neither a browser clock that
// is off nor one that steps moves them; until the first answer, the browser's own clock.
let serverOffset = null;

/** Now on the server's clock, in epoch milliseconds. */
export function serverNow() {
  return serverOffset === null ? Date.now() : serverOffset + performance.now();
}

function learnServerTime(response, sent) {
  const told = Date.parse(response.headers.get('sessionledger-time') || '');
  if (Number.isFinite(told)) serverOffset = told - (sent + performance.now()) / 2;
}

export async function request(method, path, body) {
  const init = { method, headers: { accept: 'application/json' }, cache: 'no-store' };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  const sent = performance.now();
  try {
    response = await fetch(path, init);
  } catch (_err) {
    throw new ApiError(0, 'unreachable', 'the server cannot be reached');
  }
  learnServerTime(response, sent);
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch (_err) {
    json = null;
  }
  if (response.status === 401 && path !== LOGIN_PATH) {
    for (const listener of unauthorized) listener();
  }
  if (!response.ok) {
    const error = json && json.error ? json.error : {};
    throw new ApiError(
      response.status, error.code || 'http_error',
      error.message || `HTTP ${response.status}`, error.details,
    );
  }
  return json;
}

export const get = (path) => request('GET', path);
export const post = (path, body = {}) => request('POST', path, body);

export const sessionPath = (sessionId) => `/v1/sessions/${encodeURIComponent(sessionId)}`;
export const interactionPath = (sessionId, interactionId) =>
  `${sessionPath(sessionId)}/interactions/${encodeURIComponent(interactionId)}`;
export const put = (path, body = {}) => request('PUT', path, body);
export const del = (path) => request('DELETE', path);
