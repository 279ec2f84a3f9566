// One SSE stream of the log, read with the browser's own EventSource (EL-5, docs/spec.md §11).
//
// The server sends every event with `id:` = its cursor (a session's seq, or the global
// position) and `event:` = its type. EventSource remembers the last id and, when the
// connection drops or the server closes it (a restart), reconnects by itself sending it as
// Last-Event-ID, so the server sends exactly the events after it. Two guards on top:
// - an event whose cursor is not above the last one delivered is dropped, so nothing is ever
//   shown twice whatever the network does;
// - when the browser gives up (readyState CLOSED, e.g. after an HTTP error answer while the
//   server was restarting), the stream is opened again with ?after=<cursor> after a backoff.

const RETRY_MS = [250, 500, 1000, 2000, 4000];

export class LedgerStream {
  /**
   * @param {string} url the stream's path
   * @param {string[]} types the event type names to listen for (`event:` values)
   * @param {object} hooks onEvent(envelope, cursor), onStatus(state), onOpen(), after
   */
  constructor(url, types, { onEvent, onStatus = () => {}, onOpen = () => {}, after = 0 }) {
    this.url = url;
    this.types = types;
    this.cursor = after;
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.onOpen = onOpen;
    this.source = null;
    this.closed = false;
    this.failures = 0;
    this.retryTimer = null;
    this.deliver = (message) => this.#deliver(message);
  }

  start() {
    this.#open();
    return this;
  }

  close() {
    this.closed = true;
    clearTimeout(this.retryTimer);
    if (this.source) this.source.close();
    this.onStatus('closed');
  }

  #open() {
    const separator = this.url.includes('?') ? '&' : '?';
    const url = this.cursor > 0 ? `${this.url}${separator}after=${this.cursor}` : this.url;
    const source = new EventSource(url);
    this.source = source;
    source.onopen = () => {
      this.failures = 0;
      this.onStatus('live');
      this.onOpen();
    };
    source.onerror = () => {
      if (this.closed || source !== this.source) return;
      this.onStatus('reconnecting');
      if (source.readyState === EventSource.CLOSED) this.#reopenLater();
      // otherwise (CONNECTING) the browser retries by itself, with Last-Event-ID
    };
    for (const type of this.types) source.addEventListener(type, this.deliver);
  }

  #reopenLater() {
    clearTimeout(this.retryTimer);
    const delay = RETRY_MS[Math.min(this.failures, RETRY_MS.length - 1)];
    this.failures += 1;
    this.retryTimer = setTimeout(() => {
      if (!this.closed) this.#open();
    }, delay);
  }

  #deliver(message) {
    const cursor = Number(message.lastEventId);
    if (!Number.isSafeInteger(cursor) || cursor <= this.cursor) return;  // never twice
    let envelope;
    try {
      envelope = JSON.parse(message.data);
    } catch (_err) {
      return;
    }
    this.cursor = cursor;
    this.onEvent(envelope, cursor);
  }
}
