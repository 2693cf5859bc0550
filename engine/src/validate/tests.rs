//! parse_create end to end. Expected answers come from a live DRF 3.16.1 /
//! Django 5.2 / django-phonenumber-field 9.0 serializer with the spec's
//! fields (phone narrowed to strict E.164 with its own length message, as
//! the spec requires), run with LANGUAGE_CODE='ru', unless a comment says
//! otherwise. `OK phone|webhook_url|client_ref|info|ttl` stands for success.

use super::*;

/// The outcome in one comparable line: DRF's JSON body, or `OK ...`.
fn outcome(body: &[u8]) -> String {
    match parse_create(body) {
        Ok(r) => format!(
            "OK {}|{}|{}|{}|{}",
            r.phone, r.webhook_url, r.client_ref, r.info, r.ttl_seconds_requested
        ),
        Err(CreateError::Json(detail)) => {
            format!(
                "{{\"detail\":{}}}",
                serde_json::to_string(&detail).unwrap_or_default()
            )
        }
        Err(CreateError::Fields { errors, .. }) => errors.to_json(),
    }
}

fn valid_with(extra: &str) -> Vec<u8> {
    format!(r#"{{"phone":"+79123456789","webhook_url":"https://example.com/hook",{extra}}}"#)
        .into_bytes()
}

#[rustfmt::skip]
const DRF_CASES: &[(&[u8], &str)] = &[
    // body_shapes
    (b"", "{\"phone\":[\"Обязательное поле.\"],\"webhook_url\":[\"Обязательное поле.\"]}"),
    (b"{}", "{\"phone\":[\"Обязательное поле.\"],\"webhook_url\":[\"Обязательное поле.\"]}"),
    (b"[]", "{\"non_field_errors\":[\"Недопустимые данные. Ожидался dictionary, но был получен list.\"]}"),
    (b"\"x\"", "{\"non_field_errors\":[\"Недопустимые данные. Ожидался dictionary, но был получен str.\"]}"),
    (b"1", "{\"non_field_errors\":[\"Недопустимые данные. Ожидался dictionary, но был получен int.\"]}"),
    (b"1.5", "{\"non_field_errors\":[\"Недопустимые данные. Ожидался dictionary, но был получен float.\"]}"),
    (b"true", "{\"non_field_errors\":[\"Недопустимые данные. Ожидался dictionary, но был получен bool.\"]}"),
    (b"null", "{\"non_field_errors\":[\"No data provided\"]}"),
    (b"  ", "{\"detail\":\"JSON parse error - Expecting value: line 1 column 3 (char 2)\"}"),
    (b"{", "{\"detail\":\"JSON parse error - Expecting property name enclosed in double quotes: line 1 column 2 (char 1)\"}"),
    (b"\xff", "{\"detail\":\"JSON parse error - 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte\"}"),
    (b"NaN", "{\"detail\":\"JSON parse error - Out of range float values are not JSON compliant: 'NaN'\"}"),
    (b"[{}]", "{\"non_field_errors\":[\"Недопустимые данные. Ожидался dictionary, но был получен list.\"]}"),
    (b"\xef\xbb\xbf{}", "{\"detail\":\"JSON parse error - Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)\"}"),
    (b"{\"phone\":1}  x", "{\"detail\":\"JSON parse error - Extra data: line 1 column 14 (char 13)\"}"),
    // phone
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\"}", "OK +79123456789|https://example.com/hook|||60"),
    (b"{\"phone\":\" +79123456789 \",\"webhook_url\":\"https://example.com/hook\"}", "OK +79123456789|https://example.com/hook|||60"),
    (b"{\"phone\":\"+78121234567\",\"webhook_url\":\"https://example.com/hook\"}", "OK +78121234567|https://example.com/hook|||60"),
    (b"{\"phone\":\"+77011234567\",\"webhook_url\":\"https://example.com/hook\"}", "OK +77011234567|https://example.com/hook|||60"),
    (b"{\"phone\":\"+447911123456\",\"webhook_url\":\"https://example.com/hook\"}", "OK +447911123456|https://example.com/hook|||60"),
    (b"{\"phone\":\"+12025550123\",\"webhook_url\":\"https://example.com/hook\"}", "OK +12025550123|https://example.com/hook|||60"),
    (b"{\"phone\":\"+4930123456\",\"webhook_url\":\"https://example.com/hook\"}", "OK +4930123456|https://example.com/hook|||60"),
    (b"{\"phone\":\"+4401234567890\",\"webhook_url\":\"https://example.com/hook\"}", "OK +441234567890|https://example.com/hook|||60"),
    (b"{\"phone\":\"+7912345678\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"+0123456789\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"+99912345678\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"+7 912 345 67 89\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"+7(912)3456789\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"+7-912-345-67-89\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"89123456789\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"+79123456789x\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":79123456789,\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":true,\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":{},\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":[],\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":null,\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"   \",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"+791234567891234567891234567891234\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Убедитесь, что это значение содержит не более 32 символов.\"]}"),
    (b"{\"phone\":\"+7912345678912345678912345678912\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"+\xef\xbc\x97\xef\xbc\x99\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x94\xef\xbc\x95\xef\xbc\x96\xef\xbc\x97\xef\xbc\x98\xef\xbc\x99\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    (b"{\"phone\":\"+79123456789\\u0000\",\"webhook_url\":\"https://example.com/hook\"}", "{\"phone\":[\"Введите корректный номер телефона.\"]}"),
    // webhook_url
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\"}", "OK +79123456789|https://example.com/hook|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"  https://example.com/hook  \"}", "OK +79123456789|https://example.com/hook|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"http://2130706433/\"}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"http://0177.0.0.1/\"}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"http://0x7f.1/\"}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"gopher://x.com/\"}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"ftp://example.com/\"}", "OK +79123456789|ftp://example.com/|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"http://user:pass@localhost:8080/a?b#c\"}", "OK +79123456789|http://user:pass@localhost:8080/a?b#c|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"http://[::1]:80/\"}", "OK +79123456789|http://[::1]:80/|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"http://\xd0\xbf\xd1\x80\xd0\xb8\xd0\xbc\xd0\xb5\xd1\x80.\xd1\x80\xd1\x84/\"}", "OK +79123456789|http://пример.рф/|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com:99999/\"}", "OK +79123456789|https://example.com:99999/|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://exa_mple.com/\"}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://a.c/\"}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/a b\"}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/\\u0000\"}", "{\"webhook_url\":[\"Данные содержат запрещённый символ: ноль-байт\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/\\ud800\"}", "{\"webhook_url\":[\"Surrogate characters are not allowed: U+D800.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":null}", "{\"webhook_url\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"\"}", "{\"webhook_url\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"  \"}", "{\"webhook_url\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":123}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":[]}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":true}", "{\"webhook_url\":[\"Введите правильный URL.\"]}"),
    // client_ref_info
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":\"  a  \"}", "OK +79123456789|https://example.com/hook|a||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":null}", "{\"client_ref\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"info\":null}", "{\"info\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":\"\"}", "OK +79123456789|https://example.com/hook|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"info\":\"   \"}", "OK +79123456789|https://example.com/hook|||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":true}", "{\"client_ref\":[\"Not a valid string.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"info\":{}}", "{\"info\":[\"Not a valid string.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":[]}", "{\"client_ref\":[\"Not a valid string.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":1e16}", "OK +79123456789|https://example.com/hook|1e+16||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"info\":12345678901234567890123}", "OK +79123456789|https://example.com/hook||12345678901234567890123|60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":0.00001}", "OK +79123456789|https://example.com/hook|1e-05||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"info\":-0}", "OK +79123456789|https://example.com/hook||0|60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":1e999}", "OK +79123456789|https://example.com/hook|inf||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "OK +79123456789|https://example.com/hook|aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "{\"client_ref\":[\"Убедитесь, что это значение содержит не более 120 символов.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":\"  aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa  \"}", "OK +79123456789|https://example.com/hook|aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":\"\\ud83d\\ude00\"}", "OK +79123456789|https://example.com/hook|😀||60"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"client_ref\":\"a\\u0000b\",\"info\":\"\\ud800x\\udc00\"}", "{\"client_ref\":[\"Данные содержат запрещённый символ: ноль-байт\"],\"info\":[\"Surrogate characters are not allowed: U+D800.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"info\":\"q\\\"uote\\\\\"}", "OK +79123456789|https://example.com/hook||q\"uote\\|60"),
    // ttl
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":30}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":1}", "OK +79123456789|https://example.com/hook|||1"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":0}", "{\"ttl_seconds\":[\"Убедитесь, что это значение больше либо равно 1.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":-1}", "{\"ttl_seconds\":[\"Убедитесь, что это значение больше либо равно 1.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":3600}", "OK +79123456789|https://example.com/hook|||3600"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":3601}", "{\"ttl_seconds\":[\"Убедитесь, что это значение меньше либо равно 3600.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":29}", "OK +79123456789|https://example.com/hook|||29"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":601}", "OK +79123456789|https://example.com/hook|||601"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":30.0}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":1.5}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":1e3}", "OK +79123456789|https://example.com/hook|||1000"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":36e2}", "OK +79123456789|https://example.com/hook|||3600"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":-0.0}", "{\"ttl_seconds\":[\"Убедитесь, что это значение больше либо равно 1.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":1e16}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":1e999}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":99999999999999999999999}", "{\"ttl_seconds\":[\"Убедитесь, что это значение меньше либо равно 3600.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":3600.0000001}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":true}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":false}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":null}", "{\"ttl_seconds\":[\"Это поле не может быть пустым.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":[30]}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":{}}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"30\"}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\" 30 \"}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"30.0\"}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"30.\"}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"30.00 \\n\"}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"3_0\"}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"3__0\"}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"\xd9\xa3\xd9\xa0\"}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"\xef\xbc\x93\xef\xbc\x90\"}", "OK +79123456789|https://example.com/hook|||30"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"\"}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"abc\"}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"-5\"}", "{\"ttl_seconds\":[\"Убедитесь, что это значение больше либо равно 1.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"+5\"}", "OK +79123456789|https://example.com/hook|||5"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"0x10\"}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"1e3\"}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    (b"{\"phone\":\"+79123456789\",\"webhook_url\":\"https://example.com/hook\",\"ttl_seconds\":\"\\u001c30\"}", "{\"ttl_seconds\":[\"Введите правильное число.\"]}"),
    // combined
    (b"{\"phone\":\"+79123456789\",\"phone\":\"+447911123456\",\"webhook_url\":\"https://example.com/\"}", "OK +447911123456|https://example.com/|||60"),
    (b"{\"ph\\u006fne\":\"+79123456789\",\"webhook_url\":\"https://example.com/\",\"unknown\":[[[{\"phone\":null}]]]}", "OK +79123456789|https://example.com/|||60"),
];

#[test]
fn answers_match_drf() {
    warm_up();
    for (body, want) in DRF_CASES {
        assert_eq!(
            outcome(body),
            *want,
            "body {:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn over_length_values_match_drf() {
    let long_url = format!(r#""https://example.com/{}""#, "a".repeat(480)); // 500 chars
    assert_eq!(
        outcome(format!(r#"{{"phone":"+79123456789","webhook_url":{long_url}}}"#).as_bytes()),
        format!(
            "OK +79123456789|https://example.com/{}|||60",
            "a".repeat(480)
        )
    );
    let too_long_url = format!(r#""https://example.com/{}""#, "a".repeat(481));
    assert_eq!(
        outcome(format!(r#"{{"phone":"+79123456789","webhook_url":{too_long_url}}}"#).as_bytes()),
        r#"{"webhook_url":["Убедитесь, что это значение содержит не более 500 символов."]}"#
    );
    // Every failing validator reports, in DRF's order: length, NUL, lone
    // surrogate, URL syntax.
    let everything = format!(r#""https://example.com/{} \u0000\ud800""#, "a".repeat(600));
    assert_eq!(
        outcome(format!(r#"{{"phone":"+79123456789","webhook_url":{everything}}}"#).as_bytes()),
        "{\"webhook_url\":[\"Убедитесь, что это значение содержит не более 500 символов.\",\
         \"Данные содержат запрещённый символ: ноль-байт\",\
         \"Surrogate characters are not allowed: U+D800.\",\"Введите правильный URL.\"]}"
    );
    // Characters, not bytes: 500 Cyrillic letters (1000 bytes) fit.
    let info500 = "я".repeat(500);
    assert_eq!(
        outcome(&valid_with(&format!(r#""info":"{info500}""#))),
        format!("OK +79123456789|https://example.com/hook||{info500}|60")
    );
    assert_eq!(
        outcome(&valid_with(&format!(r#""info":"{info500}я""#))),
        r#"{"info":["Убедитесь, что это значение содержит не более 500 символов."]}"#
    );
    // IntegerField refuses strings over 1000 characters before int().
    assert_eq!(
        outcome(&valid_with(&format!(
            r#""ttl_seconds":"{}""#,
            "1".repeat(1001)
        ))),
        r#"{"ttl_seconds":["Слишком длинное значение."]}"#
    );
    assert_eq!(
        outcome(&valid_with(&format!(
            r#""ttl_seconds":"{}30""#,
            " ".repeat(995)
        ))),
        "OK +79123456789|https://example.com/hook|||30"
    );
}

#[test]
fn all_field_errors_are_reported_together_in_declared_order() {
    let x121 = "x".repeat(121);
    let want = "{\"phone\":[\"Введите корректный номер телефона.\"],\
                \"webhook_url\":[\"Введите правильный URL.\"],\
                \"client_ref\":[\"Убедитесь, что это значение содержит не более 120 символов.\"],\
                \"info\":[\"Not a valid string.\"],\
                \"ttl_seconds\":[\"Убедитесь, что это значение больше либо равно 1.\"]}";
    let in_order = format!(
        r#"{{"phone":"bad","webhook_url":"bad","client_ref":"{x121}","info":true,"ttl_seconds":0}}"#
    );
    let reversed = format!(
        r#"{{"ttl_seconds":0,"info":true,"client_ref":"{x121}","webhook_url":"bad","phone":"bad"}}"#
    );
    assert_eq!(outcome(in_order.as_bytes()), want);
    assert_eq!(outcome(reversed.as_bytes()), want);
    match parse_create(in_order.as_bytes()) {
        Err(CreateError::Fields { errors, .. }) => {
            let names: Vec<&str> = errors.0.iter().map(|(f, _)| f.as_str()).collect();
            assert_eq!(names, FIELDS);
            assert_eq!(
                errors.get("info"),
                Some(&["Not a valid string.".to_owned()][..])
            );
            assert_eq!(errors.get("nope"), None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn valid_request_is_typed_and_ttl_is_clamped() {
    let parsed = parse_create(&valid_with(
        r#""client_ref":"order-1","info":"тариф","ttl_seconds":3600"#,
    ));
    assert_eq!(
        parsed,
        Ok(CreateRequest {
            phone: "+79123456789".into(),
            pool: Pool::Domestic,
            webhook_url: "https://example.com/hook".into(),
            client_ref: "order-1".into(),
            info: "тариф".into(),
            ttl_seconds_requested: 3600,
            ttl_seconds: 600,
        })
    );
    let short = parse_create(&valid_with(r#""ttl_seconds":1"#))
        .map(|r| (r.ttl_seconds_requested, r.ttl_seconds));
    assert_eq!(short, Ok((1, 30)));
    let default = parse_create(&valid_with(r#""client_ref":"x""#))
        .map(|r| (r.ttl_seconds_requested, r.ttl_seconds));
    assert_eq!(default, Ok((60, 60)));
    let international =
        parse_create(br#"{"phone":"+447911123456","webhook_url":"https://example.com/"}"#);
    assert_eq!(international.map(|r| r.pool), Ok(Pool::International));
    let kazakhstan =
        parse_create(br#"{"phone":"+77011234567","webhook_url":"https://example.com/"}"#);
    assert_eq!(kazakhstan.map(|r| r.pool), Ok(Pool::Domestic));
}

#[test]
fn field_errors_render_like_drf() {
    let mut errors = FieldErrors::default();
    assert!(errors.is_empty());
    errors.add("phone", "Обязательное поле.");
    errors.add("webhook_url", "quote \" backslash \\ tab \t nl \n");
    errors.add("phone", "second");
    errors.add("info", "line\u{2028}para\u{2029}ctl\u{1}del\u{7f}😀");
    assert!(!errors.is_empty());
    assert_eq!(
        errors.to_json(),
        "{\"phone\":[\"Обязательное поле.\",\"second\"],\
         \"webhook_url\":[\"quote \\\" backslash \\\\ tab \\t nl \\n\"],\
         \"info\":[\"line\\u2028para\\u2029ctl\\u0001del\u{7f}😀\"]}"
    );
    // The rendering is valid JSON that reads back to the same texts.
    let back: serde_json::Value = serde_json::from_str(&errors.to_json()).unwrap_or_default();
    assert_eq!(back["webhook_url"][0], "quote \" backslash \\ tab \t nl \n");
    assert_eq!(
        back["info"][0],
        "line\u{2028}para\u{2029}ctl\u{1}del\u{7f}😀"
    );
    assert_eq!(FieldErrors::default().to_json(), "{}");
}

#[test]
fn hostile_bodies_fail_cleanly() {
    let deep = "[".repeat(100_000);
    assert!(
        matches!(parse_create(deep.as_bytes()), Err(CreateError::Json(d)) if d.starts_with("JSON parse error - Nesting deeper than 512 levels"))
    );
    let deep_member = format!(r#"{{"phone":{}"#, "{\"a\":".repeat(100_000));
    assert!(matches!(
        parse_create(deep_member.as_bytes()),
        Err(CreateError::Json(_))
    ));
    // Nested but within the limit, under an unknown key: ignored.
    let nested = format!(
        r#"{{"phone":"+79123456789","webhook_url":"https://example.com/","x":{}{}}}"#,
        "[".repeat(500),
        "]".repeat(500)
    );
    assert!(parse_create(nested.as_bytes()).is_ok());
    // Arbitrary bytes never panic.
    const ALPHABET: &[u8] = b"{}[]\":,0123456789.eE+-tfnrul \\\xff\xd0";
    let mut seed: u32 = 12345;
    for len in 0..400usize {
        let body: Vec<u8> = (0..len)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                ALPHABET[(seed >> 16) as usize % ALPHABET.len()]
            })
            .collect();
        let _ = parse_create(&body);
    }
}
