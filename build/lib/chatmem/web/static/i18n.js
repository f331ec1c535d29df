/* The interface's language in the browser (PROJ-4): t() and tn() look strings up in the same
   gettext catalog the server renders the templates with.  The page carries its language's
   catalog as JSON (<script type="application/json" id="i18n-catalog">, built from the .po
   files by chatmem.web.i18n); a plural comes keyed by CLDR category, so Intl.PluralRules
   picks the form ("1 сообщение", "3 сообщения", "5 сообщений").  A string missing from the
   catalog stays English (a test forbids missing strings).

   Placeholders are {name}: t("Used ≈ {used} of {window} tokens", {used: 10, window: 16384});
   numbers given as values are formatted for the language ("16,384", "16 384", "16.384"), and
   tn(singular, plural, n, vars) fills {n} itself.  Only the msgid literals are extracted
   (make i18n): always call t("…") with a literal, never with a variable. */
(function () {
  "use strict";
  let data = {};
  try {
    const node = document.getElementById("i18n-catalog");
    data = node ? JSON.parse(node.textContent) : {};
  } catch (_) { data = {}; }
  const locale = data.locale || document.documentElement.lang || "en";
  const messages = data.messages || {};
  const plurals = new Intl.PluralRules(locale);
  const english = new Intl.PluralRules("en");
  const integers = new Intl.NumberFormat(locale);

  function fill(text, vars) {
    if (!vars) return text;
    return text.replace(/\{(\w+)\}/g, (whole, key) => {
      if (!Object.prototype.hasOwnProperty.call(vars, key)) return whole;
      const value = vars[key];
      return typeof value === "number" ? integers.format(value) : String(value);
    });
  }

  /* A message in the page's language: t("Sign out"), t("Hello, {name}", {name}). */
  function t(msgid, vars) {
    const text = messages[msgid];
    return fill(typeof text === "string" && text ? text : msgid, vars);
  }

  /* A count in the page's language: tn("{n} message", "{n} messages", n). */
  function tn(singular, plural, n, vars) {
    const forms = messages[singular];
    let text = "";
    if (forms && typeof forms === "object") text = forms[plurals.select(n)] || forms.other || "";
    if (!text) text = english.select(n) === "one" ? singular : plural;
    return fill(text, Object.assign({ n }, vars || {}));
  }

  /* The language picker in the top bar: the user's own setting (PATCH /api/v1/me), which
     wins over the browser's language; "Browser language" clears it.  The page is rendered
     again in the new language. */
  const picker = document.getElementById("language-select");
  if (picker) {
    picker.addEventListener("change", async () => {
      picker.disabled = true;
      try {
        await window.chatmem.api("PATCH", "/api/v1/me", { locale: picker.value || null });
        location.reload();
      } catch (err) {
        picker.disabled = false;
        window.chatmem.toast(err.message);
      }
    });
  }

  Object.assign(window.chatmem, { t, tn, locale });
})();
