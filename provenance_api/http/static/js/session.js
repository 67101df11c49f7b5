/* Sign-in and sign-out. The API key is sent once to POST /ui/session; the browser keeps the session in an
 * HttpOnly cookie the page cannot read, and every request rides on it. */

import { api } from './api.js';
import { announce, byId, h, view } from './dom.js';
import { closeStream, state } from './state.js';

let afterSignIn = async () => {};

/** What to do once signed in (show the route). */
export function whenSignedIn(handler) {
  afterSignIn = handler;
}

/** The header's "Signed in as …" and Sign out, shown only while signed in. */
export function setWho() {
  const signedIn = Boolean(state.session && state.session.signed_in);
  if (signedIn) byId('who-name').textContent = 'Signed in as ' + state.session.user + ' · tenant ' + state.session.tenant;
  byId('who').hidden = !signedIn;
  byId('site-nav').hidden = !signedIn;
}

export async function loadSession() {
  try {
    const s = await api('/ui/session', { allow401: true });
    state.session = s.signed_in ? s : null;
  } catch (err) {
    state.session = null;
  }
  setWho();
}

export function onSignedOut() {
  state.session = null;
  setWho();
  closeStream();
  for (const dialog of document.querySelectorAll('dialog[open]')) dialog.close();
  renderSignIn('Your session ended; sign in again.');
}

export function renderSignIn(message) {
  setWho();
  const error = h('p', { id: 'signin-error', class: 'error', role: 'alert' }, message || '');
  const input = h('input', {
    id: 'signin-key', type: 'password', name: 'api_key', autocomplete: 'off', spellcheck: 'false',
    required: true, 'aria-describedby': 'signin-hint signin-error',
  });
  const form = h('form', { class: 'signin', method: 'post', action: '/ui/session', novalidate: true },
    h('div', { class: 'field' },
      h('label', { for: 'signin-key' }, 'API key'),
      h('span', { id: 'signin-hint', class: 'hint' },
        'The admin key is printed once when the service first starts, and saved owner-only as admin.key in its data directory. Other keys: provenance keys create --tenant T --user U.'),
      input),
    h('div', { class: 'row' }, h('button', { id: 'signin-submit', class: 'button primary', type: 'submit' }, 'Sign in')),
    error);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    if (!key) { error.textContent = 'Enter an API key.'; input.focus(); return; }
    error.textContent = '';
    try {
      state.session = await api('/ui/session', { method: 'POST', body: { api_key: key }, allow401: true });
      input.value = '';
      setWho();
      announce('Signed in.');
      await afterSignIn();
    } catch (err) {
      error.textContent = err.status === 401 ? 'That API key is not valid.' : err.message;
      input.focus();
    }
  });
  view().replaceChildren(h('h1', null, 'Sign in'), h('p', null, 'Sign in with an API key to look at stored turns and trace their claims. The key is kept in a cookie this page cannot read, and never appears in an address.'), form);
  input.focus();
}

export async function signOut() {
  try { await api('/ui/logout', { method: 'POST' }); } catch (err) { /* signed out anyway */ }
  state.session = null;
  state.turn = null;
  closeStream();
  setWho();
  history.pushState(null, '', '#/');
  renderSignIn('Signed out.');
}
