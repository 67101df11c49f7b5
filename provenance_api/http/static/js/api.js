/* Requests to the service: JSON in and out, problem+json turned into readable errors. The session
 * cookie rides on every request; a 401 ends the session on the page (unless the caller expects it). */

export class ApiError extends Error {
  constructor(status, body) {
    let text = 'HTTP ' + status;
    if (body && typeof body === 'object') {
      text = body.detail || body.title || text;
      if (body.fix) text += ' — ' + body.fix;
    }
    super(text);
    this.status = status;
    this.body = body;
  }
}

let signedOutHandler = () => {};

/** Who to tell when a request answers 401 (the session ended). */
export function onUnauthorized(handler) {
  signedOutHandler = handler;
}

export async function api(path, options) {
  const opts = options || {};
  const init = { method: opts.method || 'GET', headers: { Accept: opts.accept || 'application/json' }, credentials: 'same-origin' };
  if (opts.body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  const response = await fetch(path, init);
  const type = response.headers.get('content-type') || '';
  const data = type.includes('json') ? await response.json() : await response.text();
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    if (response.status === 401 && !opts.allow401) signedOutHandler();
    throw error;
  }
  return data;
}

/** A query string from an object, leaving out empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === null || value === undefined || value === '') continue;
    q.set(key, String(value));
  }
  const text = q.toString();
  return text ? '?' + text : '';
}
