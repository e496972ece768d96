// The SIM pool page's refresh (docs/dashboard.md, "SIM pool"): every few seconds, while the
// tab is visible, fetch the element's fragment (data-refresh) and put it in place.  A session
// that ended sends the page to sign-in; an answer that fails leaves the last one shown.
"use strict";
for (const element of document.querySelectorAll("[data-refresh]")) {
  const every = Number(element.dataset.every || 3) * 1000;
  const refresh = async () => {
    if (!document.hidden) {
      try {
        const answer = await fetch(element.dataset.refresh, {credentials: "same-origin"});
        if (answer.redirected) {
          window.location.assign(answer.url);
          return;
        }
        if (answer.ok) {
          element.innerHTML = await answer.text();
        }
      } catch (error) {
        // the server is away for a moment: try again at the next turn
      }
    }
    window.setTimeout(refresh, every);
  };
  window.setTimeout(refresh, every);
}
