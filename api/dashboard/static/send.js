// The Send page (docs/dashboard.md, "Sending").  As one types the message: its segments,
// encoding and cost for one recipient, and the characters that make it UCS-2 with their GSM-7
// stand-ins, as the page's hints say them in its language (the rules of POST /v1/sms/preview).  A template chosen fills
// the message.  On "Send N messages":
// the button is disabled and says what goes on, so that a second click sends nothing more.
"use strict";
const form = document.querySelector("form[data-hints]");
if (form) {
  const text = form.querySelector("#text");
  const type = form.querySelector("#type");
  const hints = form.querySelector("#hints");
  let timer = null;
  const ask = async () => {
    if (!text.value.trim()) {
      hints.textContent = "";
      return;
    }
    const body = new URLSearchParams({csrf: form.elements.csrf.value, text: text.value, type: type.value});
    try {
      const answer = await fetch(form.dataset.hints, {method: "POST", body, credentials: "same-origin"});
      if (!answer.ok) {
        return;
      }
      const found = await answer.json();
      hints.textContent = found.said;  // written by the server, in the page's language
    } catch (error) {
      // the server is away for a moment: the hint waits for the next keystroke
    }
  };
  const later = () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(ask, 300);
  };
  text.addEventListener("input", later);
  type.addEventListener("change", later);
  const template = form.querySelector("#template");
  template.addEventListener("change", () => {
    const chosen = template.selectedOptions[0];
    if (chosen && chosen.dataset.text !== undefined) {
      text.value = chosen.dataset.text;
      later();
    }
  });
  ask();
}
for (const busy of document.querySelectorAll("form[data-busy]")) {
  busy.addEventListener("submit", () => {
    const button = busy.querySelector("button[type=submit]");
    window.setTimeout(() => { button.disabled = true; }, 0);  // after the form's own submission
    button.setAttribute("aria-busy", "true");
    busy.querySelector(".note").textContent = busy.dataset.busy;
  });
}
