"""PROJ-4 in a real browser: the four languages chosen from the browser's language, the
user's own setting over it, Russian plurals in the feed and the memory window, and numbers
written the language's way ("16 384" / "16,384" / "16.384", "16 тыс." / "16K" / "16 rb")."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import (
    ARTIFACTS,
    ConsoleErrors,
    Server,
    make_conversation,
    make_profile,
    save_screenshot,
)

pytestmark = pytest.mark.browser

S = r"[\s\u00a0\u202f]"  # a group separator or space as Intl writes it (ru: no-break space)
DIGITS = r"[\d\s\u00a0\u202f]+"

#: What a reader of each language sees: the sign-in button, the memory window's title and
#: first row, the mode, and the numbers of a 16,384-token window with a 1,024-token reserve.
LANGUAGES: dict[str, dict[str, Any]] = {
    "en": {
        "browser": "en-US",
        "sign_in": "Sign in",
        "sign_out": "Sign out",
        "title": "Conversation memory",
        "first_row": "Instructions",
        "mode": "Mode: Full memory",
        "used": re.compile(r"^Used ≈ [\d,]+ of 16,384 tokens$"),
        "reserve": "1,024",
        "percent": re.compile(r"^\d+%$"),
        "counter": re.compile(r"^[\d.]+K? / 16K$"),
    },
    "ru": {
        "browser": "ru-RU",
        "sign_in": "Войти",
        "sign_out": "Выйти",
        "title": "Память диалога",
        "first_row": "Инструкции",
        "mode": "Режим: Полная память",
        "used": re.compile(rf"^Занято ≈ {DIGITS} из 16{S}384 токенов памяти нейросети$"),
        "reserve": "1\u00a0024",
        "percent": re.compile(rf"^\d+{S}%$"),
        "counter": re.compile(rf"^[\d,]+(?:{S}тыс\.)? / 16{S}тыс\.$"),
    },
    "it": {
        "browser": "it-IT",
        "sign_in": "Accedi",
        "sign_out": "Esci",
        "title": "Contesto della conversazione",
        "first_row": "Istruzioni",
        "mode": "Modalità: Memoria completa",
        "used": re.compile(r"^Usati ≈ [\d.]+ di 16\.384 token$"),
        "reserve": "1024",  # Italian groups thousands from five digits on
        "percent": re.compile(r"^\d+%$"),
        "counter": re.compile(r"^[\d,]+K? / 16K$"),
    },
    "id": {
        "browser": "id-ID",
        "sign_in": "Masuk",
        "sign_out": "Keluar",
        "title": "Konteks percakapan",
        "first_row": "Instruksi",
        "mode": "Mode: Memori penuh",
        "used": re.compile(r"^Terpakai ≈ [\d.]+ dari 16\.384 token$"),
        "reserve": "1.024",
        "percent": re.compile(r"^\d+%$"),
        "counter": re.compile(rf"^[\d,]+(?:{S}rb)? / 16{S}rb$"),
    },
}


@contextlib.contextmanager
def _page_in(
    browser: Any, locale: str, name: str, storage_state: Any = None
) -> Iterator[tuple[Any, ConsoleErrors]]:
    """A page whose browser speaks ``locale`` (Accept-Language and navigator.language)."""
    console = ConsoleErrors()
    context = browser.new_context(
        viewport={"width": 1280, "height": 860}, locale=locale, storage_state=storage_state
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    console.attach(page)
    try:
        yield page, console
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
        context.close()
    assert console.unexpected() == [], "console errors in the page"


def _open_memory_window(page: Any, server: Server, conversation: dict[str, Any]) -> Any:
    page.goto(server.url + "/c/" + conversation["id"])
    expect(page.locator("#chat-title")).to_have_text(conversation["title"])
    expect(page.locator("#counter-text")).not_to_have_text("–")
    page.locator("#counter").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    return dialog


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_each_language_is_chosen_from_the_browser_language(
    browser: Any, server: Server, alice_session: Any, profiles: Any, lang: str
) -> None:
    want = LANGUAGES[lang]
    with _page_in(browser, want["browser"], f"i18n-signin-{lang}") as (page, _):
        page.goto(server.url + "/")
        expect(page.locator("html")).to_have_attribute("lang", lang)
        expect(page.get_by_role("button", name=want["sign_in"], exact=True)).to_be_visible()
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=3, title=f"Memory {lang}")
    with _page_in(browser, want["browser"], f"i18n-{lang}", alice_session) as (page, _):
        dialog = _open_memory_window(page, server, c)
        expect(page.locator("html")).to_have_attribute("lang", lang)
        expect(page.locator("#counter-text")).to_have_text(want["counter"])
        expect(dialog.locator("#memory-title")).to_have_text(want["title"])
        expect(dialog.locator("#mw-breakdown th").first).to_have_text(want["first_row"])
        expect(dialog.locator("#mw-used")).to_have_text(want["used"])
        expect(dialog.locator("tr[data-key=reserve] td")).to_have_text(want["reserve"])
        assert dialog.locator("tr[data-key=reserve] td").inner_text() == want["reserve"]
        expect(dialog.locator("#mw-percent")).to_have_text(want["percent"])
        expect(dialog.locator("#mw-mode-line")).to_contain_text(want["mode"])
        # The price is asked when the window opens: wait for it before the picture.
        expect(dialog.locator("#compress-button")).to_contain_text("≈", timeout=15_000)
        if lang == "ru":
            save_screenshot(page, "memory-window-ru.png", readme=True)
        page.keyboard.press("Escape")
        expect(page.get_by_role("button", name=want["sign_out"], exact=True)).to_be_visible()


def test_the_user_setting_overrides_the_browser_language(
    browser: Any, server: Server, alice_session: Any
) -> None:
    with _page_in(browser, "ru-RU", "i18n-user-setting", alice_session) as (page, _):
        try:
            page.goto(server.url + "/profiles")
            expect(page.get_by_role("button", name="Выйти")).to_be_visible()
            page.get_by_label("Язык").select_option("id")
            expect(page.locator("html")).to_have_attribute("lang", "id")
            expect(page.get_by_role("button", name="Keluar")).to_be_visible()
            expect(page.get_by_role("heading", name="Profil model")).to_be_visible()
            with server.api("alice") as api:
                assert api.get("/api/v1/me").json()["locale"] == "id"
            # Another page, the same setting (it is the user's, not this page's).
            page.goto(server.url + "/archive")
            expect(page.get_by_role("heading", name="Percakapan yang diarsipkan")).to_be_visible()
            # "Browser language" hands the choice back to Accept-Language.
            page.get_by_label("Bahasa", exact=True).select_option("")
            expect(page.locator("html")).to_have_attribute("lang", "ru")
            expect(page.get_by_role("heading", name="Архив чатов")).to_be_visible()
        finally:
            with server.api("alice") as api:
                api.patch("/api/v1/me", json={"locale": None})


def _russian_form(n: int, one: str, few: str, many: str) -> str:
    if n % 10 == 1 and n % 100 != 11:
        return one
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return few
    return many


@pytest.mark.parametrize("n", [1, 2, 4, 5, 11, 12, 21, 22, 25, 101, 111, 1234])
def test_russian_plurals_follow_the_number(
    browser: Any, server: Server, alice_session: Any, n: int
) -> None:
    """tn() in the page, with the Russian catalog: the three forms and grouped digits."""
    with _page_in(browser, "ru-RU", f"i18n-plural-{n}", alice_session) as (page, _):
        page.goto(server.url + "/archive")
        text = page.evaluate("(n) => window.chatmem.tn('{n} message', '{n} messages', n)", n)
        digits = f"{n:,}".replace(",", "\u00a0")
        word = _russian_form(n, "сообщение", "сообщения", "сообщений")
        assert text == f"{digits} {word}"


@pytest.mark.parametrize(("pairs", "window"), [(3, 10_001), (6, 16_384)])
def test_russian_plurals_in_the_feed_and_the_memory_window(
    browser: Any,
    server: Server,
    alice_session: Any,
    model: FakeModelServer,
    pairs: int,
    window: int,
) -> None:
    """Compress now in Russian: the result, the feed's marker and the window's token line
    each take the form their number needs ("4 ранних сообщения", "10 ранних сообщений",
    "из 10 001 токена")."""
    with server.api("alice") as api:
        profile = make_profile(
            api,
            model.base_url,
            f"Модель {window}",
            context_window=window,
            answer_reserve=1024,
            input_price_per_mtok=3.0,
            output_price_per_mtok=15.0,
        )
        c = make_conversation(api, profile["id"], pairs=pairs, title=f"Сжатие {pairs}")
    with _page_in(browser, "ru-RU", f"i18n-compress-{pairs}", alice_session) as (page, _):
        dialog = _open_memory_window(page, server, c)
        grouped = f"{window:,}".replace(",", S)
        tokens = _russian_form(window, "токена", "токенов", "токенов")
        expect(dialog.locator("#mw-used")).to_have_text(
            re.compile(rf"^Занято ≈ {DIGITS} из {grouped} {tokens} памяти нейросети$")
        )
        button = dialog.get_by_role("button", name=re.compile(r"^Сжать сейчас · ≈ "))
        expect(button).to_be_visible(timeout=15_000)
        model.reply("Цель: обсудить темы. Факты: темы интересны.")
        button.click()
        result = dialog.locator("#compress-result")
        expect(result).to_contain_text("Готово")
        count = int(re.sub(r"\D", "", result.inner_text().split("сообщ")[0]))
        early = _russian_form(count, "раннее сообщение", "ранних сообщения", "ранних сообщений")
        expect(result).to_contain_text(f"{count} {early}")
        page.keyboard.press("Escape")
        marker = page.locator(".compaction-marker .compaction-text")
        expect(marker).to_have_text(f"Память диалога сжата — {count} {early} в сводке")
        summary = page.locator(".compaction-marker").get_by_role("button", name="Показать сводку")
        expect(summary).to_be_visible()
