package sentinel.interop;

import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.util.ArrayList;
import java.util.List;

/**
 * Typed call arguments of a scenario: {@code {"int": 5}}, {@code {"long": 5}},
 * {@code {"string": "a"}}, {@code {"double": 1.5}}, {@code {"float": 1.5}},
 * {@code {"bool": true}}, {@code {"char": "c"}}, {@code {"list": [...]}} (a
 * {@code java.util.List}) and {@code {"array": [...]}} (an {@code Object[]}).
 */
final class Args {
    private Args() {}

    static Object[] toJava(JSONArray args) {
        if (args == null) {
            return new Object[0];
        }
        Object[] out = new Object[args.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = value(args.getJSONObject(i));
        }
        return out;
    }

    static Object value(JSONObject v) {
        if (v.containsKey("int")) {
            return v.getInteger("int");
        }
        if (v.containsKey("long")) {
            return v.getLong("long");
        }
        if (v.containsKey("string")) {
            return v.getString("string");
        }
        if (v.containsKey("double")) {
            return v.getDouble("double");
        }
        if (v.containsKey("float")) {
            return v.getFloat("float");
        }
        if (v.containsKey("bool")) {
            return v.getBoolean("bool");
        }
        if (v.containsKey("char")) {
            return v.getString("char").charAt(0);
        }
        if (v.containsKey("list")) {
            List<Object> list = new ArrayList<>();
            JSONArray items = v.getJSONArray("list");
            for (int i = 0; i < items.size(); i++) {
                list.add(value(items.getJSONObject(i)));
            }
            return list;
        }
        if (v.containsKey("array")) {
            return toJava(v.getJSONArray("array"));
        }
        throw new IllegalArgumentException("unknown argument " + v);
    }
}
