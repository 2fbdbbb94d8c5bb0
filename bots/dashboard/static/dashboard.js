// memorybot dashboard: small conveniences only; every page works without this file.
// A static file rather than inline script, so the Content-Security-Policy needs no
// 'unsafe-inline' and chat text can never run as script.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Filters apply as soon as a choice changes.
  for (const select of document.querySelectorAll("form[data-autosubmit] select")) {
    select.addEventListener("change", () => select.form.requestSubmit());
  }
  // A link to a section (#facts, #tier-short) opens it.
  const target = window.location.hash && document.getElementById(window.location.hash.slice(1));
  if (target instanceof HTMLDetailsElement) {
    target.open = true;
  }
  // One click per change: a second click while the page reloads would post it twice.
  for (const form of document.querySelectorAll("form[method='post']")) {
    form.addEventListener("submit", () => {
      for (const button of form.querySelectorAll("button[type='submit']")) {
        button.disabled = true;
      }
    });
  }
});

// Coming back with the Back button shows the page from cache: make its buttons work again.
window.addEventListener("pageshow", () => {
  for (const button of document.querySelectorAll("form[method='post'] button[disabled]")) {
    button.disabled = false;
  }
});
