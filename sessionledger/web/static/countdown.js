// The auto-continue countdown of a question (HO-4, HO-5, HO-7), drawn only from the
// server's absolute times: hidden while `hiddenGrace` and before `visibleAt`; then the time
// left until `deadlineAt` and the deadline itself; "paused" once the user engaged. A reload or
// a reconnect reads the same three instants from the server, so it shows the same deadline.
// "Now" is the server's (api.js serverNow): a browser clock that is off or steps moves nothing.

import { serverNow } from './api.js';
import { clock, fill, h, instant, minutesSeconds } from './dom.js';

const TICK_MS = 250;

/** A countdown element for one interaction; update() it with the document's autoResolution. */
export function countdownElement() {
  const el = h('div', { class: 'countdown', hidden: true, 'aria-live': 'off' });
  el.dataset.state = 'none';
  return el;
}

export function updateCountdown(el, autoResolution) {
  const timer = autoResolution || {};
  el.dataset.state = timer.state || 'none';
  for (const key of ['startedAt', 'visibleAt', 'deadlineAt']) {
    if (timer[key]) el.dataset[key] = timer[key];
    else delete el.dataset[key];
  }
  draw(el, serverNow());
}

function draw(el, now) {
  const { state, visibleAt, deadlineAt } = el.dataset;
  const shown = state === 'countdown' || state === 'paused'
    || (state === 'hiddenGrace' && now >= instant(visibleAt));
  el.hidden = !shown;
  el.dataset.visible = shown ? 'true' : 'false';
  if (!shown) {
    if (el.dataset.drawn) el.replaceChildren();
    delete el.dataset.drawn;
    return;
  }
  if (state === 'paused') {
    if (el.dataset.drawn === 'paused') return;
    el.dataset.drawn = 'paused';
    fill(el, h('span', { class: 'countdown-paused' },
      'Countdown paused — this question waits for your answer'));
    return;
  }
  const left = instant(deadlineAt) - now;
  const text = left > 0 ? `Auto-continues in ${minutesSeconds(left)}` : 'Auto-continuing…';
  const key = `${text}|${deadlineAt}`;
  if (el.dataset.drawn === key) return;  // unchanged: keep the nodes
  el.dataset.drawn = key;
  const deadline = h('time', {
    class: 'countdown-deadline', datetime: deadlineAt, title: deadlineAt,
    dataset: { deadlineAt },
  }, clock(deadlineAt));
  fill(el, h('span', { class: 'countdown-remaining' }, text), ' · deadline ', deadline);
}

/** An element with `data-deadline-at` (the session list's) as the M:SS left until then. */
export function drawTimeLeft(el, now) {
  const text = minutesSeconds(instant(el.dataset.deadlineAt) - now);
  if (el.textContent !== text) el.textContent = text;
}

let ticker = null;

/** Redraw every countdown on the page a few times a second (one timer for the page). */
export function startTicking() {
  if (ticker !== null) return;
  ticker = setInterval(() => {
    const now = serverNow();
    for (const el of document.querySelectorAll('.countdown')) draw(el, now);
    for (const el of document.querySelectorAll('.time-left')) drawTimeLeft(el, now);
  }, TICK_MS);
}
