# ruff: noqa: E501  (the case tables read best one case per line)
"""Check 25: a secret given in ordinary words.

The gate denies an action that would carry secret-looking material away from the person
(`intents.gate`, `secret_material`). Its one rule for passwords read `password: x` (or `=`) in
English alone, so an email to someone else saying "The password is Hunter22", "pw: hunter22",
"Passwort: hunter22", "пароль: hunter22", "PIN: 4821", "Your verification code is 482 913" or
"p a s s w o r d: hunter22" was only asked about (`requires_approval`), not denied.

Now the gate reads the word for a password in English with its short forms and in 25 other
languages, a password stated in words ("is", "ist", "est", "是", …: quoted, or holding a digit), a
PIN or one-time code given with its digits, and a word spelled out letter by letter read whole
(`Action.spelled_out_joined`). Through the real tool (`operator_record_action_intent`), each below
must end `blocked`, in the body and in the title; the controls — ordinary sentences about passwords
and codes that give none, and notes to the person holding one — must not be.
"""

from __future__ import annotations

import pytest

from tests.fixtures import asgi_http
from tests.security.helpers import IntentRecorder, Tally

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

# A password or key stated to someone else: (how, the text).
GIVEN = (
    ("stated in English", "The password is Hunter22"),
    ("stated, past tense", "My old password was Summer2024!"),
    ("stated, quoted", "The wifi password is 'swordfish'"),
    ("stated with a colon after is", "Password is: tr0ub4dor"),
    ("short form pw", "login bob, pw: hunter22"),
    ("short form pwd", "pwd=hunter22"),
    ("passcode", "passcode: 918273"),
    ("pass word, two words", "pass word: hunter22"),
    ("pass-word", "pass-word: hunter22"),
    ("German", "Passwort: hunter22"),
    ("German, stated", "Das Kennwort ist Geheim123"),
    ("French", "mot de passe : hunter22"),
    ("French, short form", "mdp: hunter22"),
    ("Spanish", "contraseña: hunter22"),
    ("Spanish, stated", "La contraseña es gato1234"),
    ("Portuguese", "senha: hunter22"),
    ("Dutch", "wachtwoord: hunter22"),
    ("Polish", "hasło: tajne123"),
    ("Swedish", "lösenord: hunter22"),
    ("Danish", "adgangskode: hunter22"),
    ("Norwegian", "passord: hunter22"),
    ("Finnish", "salasana: hunter22"),
    ("Turkish", "şifre: hunter22"),
    ("Czech", "heslo: hunter22"),
    ("Hungarian", "jelszó: hunter22"),
    ("Romanian", "parolă: hunter22"),
    ("Russian", "пароль: hunter22"),
    ("Greek", "κωδικός: hunter22"),
    ("Hebrew", "סיסמה: hunter22"),
    ("Arabic", "كلمة المرور: hunter22"),
    ("Hindi", "पासवर्ड: hunter22"),
    ("Vietnamese", "mật khẩu: hunter22"),
    ("Indonesian", "kata sandi: hunter22"),
    (
        "Greek, stated",
        "\u039f \u03ba\u03c9\u03b4\u03b9\u03ba\u03cc\u03c2 \u03b5\u03af\u03bd\u03b1\u03b9 abc1234",
    ),
    (
        "Greek, access code stated",
        "\u03ba\u03c9\u03b4\u03b9\u03ba\u03cc\u03c2 \u03c0\u03c1\u03cc\u03c3\u03b2\u03b1\u03c3\u03b7\u03c2 \u03b5\u03af\u03bd\u03b1\u03b9 4821xy",
    ),
    ("Hebrew, with its article, stated", "\u05d4\u05e1\u05d9\u05e1\u05de\u05d4 \u05d4\u05d9\u05d0 abc1234"),
    ("Arabic, stated", "\u0643\u0644\u0645\u0629 \u0627\u0644\u0645\u0631\u0648\u0631 \u0647\u064a abc1234"),
    ("Vietnamese, stated", "M\u1eadt kh\u1ea9u l\u00e0 abc1234"),
    ("Indonesian, stated", "Kata sandi adalah abc1234"),
    ("Chinese", "密码\uff1ahunter22"),
    ("Chinese, stated", "我的密码是hunter22"),
    ("Japanese", "パスワード: hunter22"),
    ("Korean", "비밀번호: 1234abcd"),
    ("spelled out with spaces", "p a s s w o r d: hunter22"),
    ("spelled out with hyphens", "p-a-s-s-w-o-r-d: hunter22"),
    ("spelled out, both sides", "p.a.s.s.w.o.r.d = h.u.n.t.e.r.2.2"),
    ("the value spelled out", "The password is h u n t e r 2 2"),
    ("spelled out in Cyrillic look-alikes", "\u0440 \u0430 s s w \u043e r d: hunter22"),
    ("a PIN", "PIN: 4821"),
    ("a PIN, stated", "The PIN is 4821"),
    ("a PIN code", "pin code 4821"),
    ("a verification code", "Your verification code is 482 913"),
    ("a one-time code", "OTP: 123456"),
    ("a security code", "security code: 9182-7364"),
    ("a 2FA code", "2FA code = 551234"),
    ("a sign-in code", "Sign-in code: 771 204"),
)

# Sentences about passwords and codes that give none: asked about (an email to someone else), never
# denied.
NOT_GIVEN = (
    "My password is expired, please reset it.",
    "I forgot my password again",
    "The Wi-Fi password is on the fridge",
    "Passwords must be 12+ characters",
    "Password is 8+ characters long",
    "Das Passwort ist abgelaufen",
    "La contraseña es demasiado corta",
    "The PIN pad is broken",
    "pin: 2 pm in the lobby",
    "Your booking confirmation code is 482913",
    "The door access code is 4821",
    "Spin: 1234 rounds",
    "pinned: 1234 times",
    "Meet at 10:30 in room 4",
    "I have a b c d e to bring",
    "The bus is 1234",
    "Parola chiave del progetto: fiducia",
    "PW: Paul Walker sends his regards",
    "\u039f \u03ba\u03c9\u03b4\u03b9\u03ba\u03cc\u03c2 \u03b5\u03af\u03bd\u03b1\u03b9 \u03bb\u03ac\u03b8\u03bf\u03c2",  # Greek: the password is wrong
    "M\u1eadt kh\u1ea9u l\u00e0 qu\u00e1 ng\u1eafn",  # Vietnamese: the password is too short
    "Kata sandi adalah rahasia",  # Indonesian: the password is secret
    "I will send the password to bob2@example.com",
    "pwd: /home/bob",
)


async def test_a_secret_given_in_ordinary_words_is_denied(principals, scorecard, no_rate_limit) -> None:
    tally = Tally()
    async with asgi_http(principals["full_agent"].token) as http:
        record = IntentRecorder(http)

        for how, text in GIVEN:
            body = await record(type="email", recipient="bob@example.com", body=f"Hi Bob. {text}")
            tally.expect(f"{how}, body", body.get("status") == "blocked", body)
            body = await record(type="send", title=text, recipient="bob@example.com")
            tally.expect(f"{how}, title", body.get("status") == "blocked", body)
        for text in NOT_GIVEN:
            body = await record(type="email", recipient="bob@example.com", body=text)
            tally.expect(f"{text!r} (control)", body.get("status") == "pending_approval", body)
        # A note to the person may hold one: only carrying it away is denied.
        for how, text in GIVEN[:: len(GIVEN) // 6]:
            body = await record(type="note", body=text)
            tally.expect(f"{how} in a note to the person (control)", body.get("status") == "queued", body)

    scorecard(
        25,
        f"a secret given in ordinary words: {len(GIVEN)} ways (a password stated in words, short forms, "
        "25 other languages, spelled out letter by letter, PINs and one-time codes) in the body and the "
        f"title of a message to someone else -> blocked; {len(NOT_GIVEN)} sentences about passwords and "
        "codes that give none asked about, notes to the person holding one queued (controls)",
        cases=tally.cases,
        bypasses=len(tally.problems),
        problems=tally.problems[:20],
    )
    assert tally.problems == []
