// Building DOM nodes. Text always goes in as text nodes: nothing from the log is parsed as
// HTML here (the one HTML path is markdown.js, which escapes first).

/**
 * h('li', {class: 'x', dataset: {seq: 3}, onclick: fn}, 'text', child) → an element.
 * Strings and numbers become text nodes; null, undefined and false are skipped.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key in el && typeof value !== 'string') el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

const pad = (n, width = 2) => String(n).padStart(width, '0');

/** Milliseconds since the epoch of one of the server's ISO 8601 instants (NaN if absent). */
export const instant = (iso) => (iso ? Date.parse(iso) : NaN);

/** HH:MM:SS in the browser's time zone: the same instant always reads the same. */
export function clock(iso) {
  const t = new Date(instant(iso));
  if (Number.isNaN(t.getTime())) return '';
  return `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`;
}

/** HH:MM:SS.mmm, for the audit timeline. */
export const clockMs = (iso) => {
  const t = new Date(instant(iso));
  return Number.isNaN(t.getTime()) ? '' : `${clock(iso)}.${pad(t.getMilliseconds(), 3)}`;
};

/** Whole seconds left as M:SS (never negative), rounded up so 0:00 means "now". */
export function minutesSeconds(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(total / 60)}:${pad(total % 60)}`;
}

const CLIENT_NAMES = { 'claude-code': 'Claude Code', codex: 'Codex CLI', gemini: 'Gemini CLI' };

/** The name people know a session's client by (CC-9); any other client as it names itself. */
export const clientName = (client) => CLIENT_NAMES[client] || String(client);

export function clip(text, limit = 140) {
  const flat = String(text ?? '').replace(/\s+/g, ' ').trim();
  return flat.length > limit ? `${flat.slice(0, limit - 1)}…` : flat;
}
